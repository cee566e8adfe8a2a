#pragma once
// The distinct GEMM shapes a model's training step runs on one tensor-parallel rank, in the
// orientation the step runs them: what `calibrate --extra-shapes` times so that the cost model
// prices them from their own rows instead of the nearest shape of its grid.
#include <string>
#include <vector>

#include "model_config.h"

namespace trainsim {

// Row-major C[m,n] = op(A)[m,k] op(B)[k,n]; ta / tb: A / B transposed. A weight gradient (ta) is
// accumulated into the fp32 gradient; calibrate times it both ways.
struct GemmUse {
  int m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  auto operator<=>(const GemmUse&) const = default;
};

// Every layer's forward, input-gradient and weight-gradient GEMMs and the logits' three, for
// micro-batches of `micro_batch` sequences at tensor-parallel degree `tp` (the vocabulary padded
// as the model pads it over `tp`): sorted, each once.
std::vector<GemmUse> model_gemm_shapes(const ModelConfig& m, int tp, int micro_batch);

// The bytes calibrate allocates to time a shape: bf16 A and B and an fp32 output (the accumulating
// table's), once for the largest shape of a table. Shapes given to calibrate are held under
// kMaxGemmOperandBytes, which leaves an 80 GB part room for the copy buffers and the context.
double gemm_operand_bytes(const GemmUse& g);
inline constexpr double kMaxGemmOperandBytes = 24.0 * (1ull << 30);

// "m n k ta tb" lines, as `planner gemm-shapes` prints them and `calibrate --extra-shapes` reads
// them ('#' starts a comment). parse throws InputError naming `where` and the line.
std::string format_gemm_shapes(const std::vector<GemmUse>& shapes, const std::string& comment);
std::vector<GemmUse> parse_gemm_shapes(const std::string& text, const std::string& where);

}  // namespace trainsim
