#include "step_work.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>

#include "memory_model.h"

namespace trainsim::sim {

void add_comm(CommTotals& t, const Op& op, double times) {
  if (op.comm == TpComm::none) return;
  const int k = op.comm == TpComm::all_reduce ? 0 : op.comm == TpComm::all_gather ? 1 : 2;
  t.bytes[k] += op.comm_bytes * times;
  t.count[k] += static_cast<int>(times);
}

void add_totals(CommTotals& t, const CommTotals& x) {
  for (int k = 0; k < 3; ++k) t.bytes[k] += x.bytes[k], t.count[k] += x.count[k];
}

double ops_time(const CostModel& c, const std::vector<Op>& ops) {
  double t = 0;
  for (const auto& op : ops) t += c.op_time_s(op);
  return t;
}

const LayerCosts& layer_costs(const StepInput& in) {
  const CostModel& cost = *in.cost;
  const ModelConfig& m = *in.model;
  const Layout& L = in.layout;
  // Cost model instance, model shape, TP, sequence parallelism, recompute, micro-batch, precision.
  using Key = std::array<std::int64_t, 15>;
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      std::size_t h = 0;
      for (std::int64_t x : k) h = h * 1000003u + static_cast<std::size_t>(x);
      return h;
    }
  };
  thread_local std::unordered_map<Key, LayerCosts, KeyHash> cache;
  const bool sp = L.sequence_parallel && L.tp > 1;
  const Key key{static_cast<std::int64_t>(cost.instance()), static_cast<int>(m.family), m.layers, m.hidden, m.heads, m.kv_heads,
                m.ffn_hidden, m.vocab, m.seq_len, m.tied_embeddings, L.tp, sp, static_cast<int>(L.recompute), L.micro_batch,
                static_cast<int>(in.precision)};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() > 1024) cache.clear();
  const OpContext ctx{m, L.tp, sp, L.recompute, L.micro_batch, in.precision};
  LayerCosts c;
  const LayerOps layer = transformer_layer_ops(ctx);
  c.layer_fwd_s = ops_time(cost, layer.forward);
  c.layer_bwd_s = ops_time(cost, layer.backward);
  c.layer_recompute_s = ops_time(cost, layer.recompute);
  for (const auto& op : layer.forward) add_comm(c.layer_fwd, op, 1);
  for (const auto& op : layer.backward) add_comm(c.layer_bwd, op, 1);
  for (const auto& op : layer.recompute) add_comm(c.layer_recompute, op, 1);
  auto part = [&](const LayerOps& x, LayerCosts::Part& p) {
    p.fwd_s = ops_time(cost, x.forward);
    p.bwd_s = ops_time(cost, x.backward);
    for (const auto& op : x.forward) add_comm(p.fwd, op, 1);
    for (const auto& op : x.backward) add_comm(p.bwd, op, 1);
  };
  part(embedding_ops(ctx), c.embedding);
  part(head_ops(ctx), c.head);
  return cache.emplace(key, c).first->second;
}


void chunk_work(const StepInput& in, int vpp, std::vector<ChunkWork>& chunks) {
  const ModelConfig& m = *in.model;
  const Layout& L = in.layout;
  const int pp = L.pp;
  const LayerCosts& lc = layer_costs(in);
  const double lf = lc.layer_fwd_s, lb = lc.layer_bwd_s, lr = lc.layer_recompute_s;
  const CommTotals &cf = lc.layer_fwd, &cb = lc.layer_bwd, &cr = lc.layer_recompute;
  const ParamCount pc = count_params(m);
  const double h = m.hidden;
  const double norm = m.family == Family::gpt ? 6.0 * h : 2.0 * h;
  const double layer_params = (pc.per_layer - norm) / L.tp + norm;
  chunks.assign(pp * vpp, {});
  for (int s = 0; s < pp; ++s)
    for (int c = 0; c < vpp; ++c) {
      const int vs = c * pp + s;
      ChunkWork& w = chunks[s * vpp + c];
      w.layers = layers_on_stage(m.layers, pp * vpp, vs);
      w.fwd_s = w.layers * lf;
      w.bwd_s = w.layers * lb;
      w.recompute_s = w.layers * lr;
      for (int i = 0; i < 3; ++i) {
        w.tp_fwd.bytes[i] = cf.bytes[i] * w.layers; w.tp_fwd.count[i] = cf.count[i] * w.layers;
        w.tp_bwd.bytes[i] = cb.bytes[i] * w.layers; w.tp_bwd.count[i] = cb.count[i] * w.layers;
        w.tp_recompute.bytes[i] = cr.bytes[i] * w.layers; w.tp_recompute.count[i] = cr.count[i] * w.layers;
        w.tp_layer_bwd.bytes[i] = cb.bytes[i]; w.tp_layer_bwd.count[i] = cb.count[i];
      }
      w.layer_bwd_s = lb;
      w.layer_fwd_s = lf;
      w.tp_layer_fwd = cf;
      w.layer_params_per_rank = layer_params;
      w.grad_bytes_per_layer = 4.0 * layer_params;
      {
        const double f = m.ffn_hidden, kv = m.kv_hidden(), t = L.tp;
        const double up = (m.family == Family::gpt ? 1.0 : 2.0) * h * f / t;
        w.layer_tensor_bytes = {4.0 * f * h / t, 4.0 * up, 4.0 * h * h / t, 4.0 * h * (h + 2.0 * kv) / t};
        double listed = 0;
        for (double b : w.layer_tensor_bytes) listed += b;
        w.layer_tensor_bytes.push_back(std::max(0.0, w.grad_bytes_per_layer - listed));
      }
      w.params_per_rank = layer_params * w.layers;
      auto add_extra = [&](const LayerCosts::Part& x, double params) {
        w.fwd_s += x.fwd_s;
        w.bwd_s += x.bwd_s;
        w.extra_fwd_s += x.fwd_s;
        w.extra_bwd_s += x.bwd_s;
        for (CommTotals* t : {&w.tp_fwd, &w.tp_extra_fwd}) add_totals(*t, x.fwd);
        for (CommTotals* t : {&w.tp_bwd, &w.tp_extra_bwd}) add_totals(*t, x.bwd);
        w.extra_grad_bytes += 4.0 * params;
        w.params_per_rank += params;
      };
      if (vs == 0) add_extra(lc.embedding, static_cast<double>(pc.embedding) / L.tp);
      if (vs == pp * vpp - 1) {
        double head_params = static_cast<double>(pc.final_norm);
        if (!m.tied_embeddings) head_params += static_cast<double>(pc.lm_head) / L.tp;
        else if (pp > 1) head_params += static_cast<double>(m.vocab) * m.hidden / L.tp;
        add_extra(lc.head, head_params);
      }
    }
}

}  // namespace trainsim::sim
