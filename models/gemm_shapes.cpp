#include "gemm_shapes.h"

#include <cmath>
#include <set>
#include <sstream>

#include "input_error.h"
#include "layer_ops.h"

namespace trainsim {

namespace {

// The orientation each GEMM of layer_ops runs in (the project's runner, as Megatron-LM): a layer's
// forward x[T,in] w[in,out] and input gradient dy[T,out] w^T, the logits against the vocabulary-
// major output weight (lnf x E^T, then dlogits x E), every weight gradient x^T dy.
GemmUse orient(const Op& op) {
  auto ends_with = [&](const std::string& s) {
    return op.name.size() >= s.size() && op.name.compare(op.name.size() - s.size(), s.size(), s) == 0;
  };
  GemmUse g{static_cast<int>(std::lround(op.m)), static_cast<int>(std::lround(op.n)), static_cast<int>(std::lround(op.k)), false, false};
  if (op.accumulate) g.ta = true;
  else if (op.name == "logits") g.tb = true;
  else if (ends_with(".dgrad") && op.name != "logits.dgrad") g.tb = true;
  return g;
}

}  // namespace

std::vector<GemmUse> model_gemm_shapes(const ModelConfig& model, int tp, int micro_batch) {
  OpContext c{with_padded_vocab(model, tp), tp, false, Recompute::none, micro_batch, Precision::bf16};
  std::set<GemmUse> out;
  for (const LayerOps& ops : {transformer_layer_ops(c), head_ops(c)})
    for (const auto* list : {&ops.forward, &ops.backward})
      for (const Op& op : *list)
        if (op.kind == OpKind::gemm) out.insert(orient(op));
  return {out.begin(), out.end()};
}

double gemm_operand_bytes(const GemmUse& g) {
  return 2.0 * (double(g.m) * g.k + double(g.k) * g.n) + 4.0 * double(g.m) * g.n;
}

std::string format_gemm_shapes(const std::vector<GemmUse>& shapes, const std::string& comment) {
  std::ostringstream s;
  if (!comment.empty()) s << "# " << comment << "\n";
  s << "# m n k ta tb: row-major C[m,n] = op(A)[m,k] op(B)[k,n], ta / tb 1 where A / B is transposed\n";
  for (const auto& g : shapes) s << g.m << " " << g.n << " " << g.k << " " << g.ta << " " << g.tb << "\n";
  return s.str();
}

std::vector<GemmUse> parse_gemm_shapes(const std::string& text, const std::string& where) {
  std::vector<GemmUse> out;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    if (f.empty()) continue;
    const std::string at = where + ":" + std::to_string(no);
    if (f.size() != 5) throw InputError(at, "expected five fields, m n k ta tb; found " + std::to_string(f.size()));
    long long v[5];
    for (int i = 0; i < 5; ++i) {
      std::size_t used = 0;
      try {
        v[i] = std::stoll(f[i], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != f[i].size()) throw InputError(at, "'" + f[i] + "' is not an integer");
    }
    for (int i = 0; i < 3; ++i)
      if (v[i] < 1 || v[i] > 1 << 20) throw InputError(at, "m, n and k must be from 1 to 1048576");
    for (int i = 3; i < 5; ++i)
      if (v[i] != 0 && v[i] != 1) throw InputError(at, "ta and tb must be 0 or 1");
    out.push_back({static_cast<int>(v[0]), static_cast<int>(v[1]), static_cast<int>(v[2]), v[3] == 1, v[4] == 1});
  }
  return out;
}

}  // namespace trainsim
