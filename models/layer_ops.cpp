#include "layer_ops.h"

namespace trainsim {
namespace {

// Memory-bound bytes follow a plain unfused implementation (the one kernels/ runs): each kernel
// reads its inputs and writes its outputs once, except LayerNorm backward, which reads its inputs
// in two passes for the input gradient, once more for the gain and bias gradients, and adds the
// residual gradient: 5 times the forward's bytes.
constexpr double kLayerNormBackwardPasses = 5.0;

// Forward GEMM y[M,N] = x[M,K] w[K,N] and its backward pair: dgrad dx[M,K] = dy[M,N] w^T and
// wgrad dw[K,N] = x^T dy, each with the same 2MNK FLOPs.
Op gemm(const std::string& name, double m, double n, double k, double elem) {
  Op op;
  op.name = name;
  op.kind = OpKind::gemm;
  op.m = m; op.n = n; op.k = k;
  op.flops = 2.0 * m * n * k;
  op.bytes = elem * (m * k + k * n + m * n);
  return op;
}

// A weight gradient dw[K,N] = x^T dy (m = K, n = N, k = tokens), added into the fp32 gradient
// that mixed precision keeps (read and written in fp32), as Megatron-LM's fused gradient
// accumulation and the project's runner do.
Op weight_gradient(const std::string& name, double m, double n, double k, double elem) {
  Op op = gemm(name, m, n, k, elem);
  op.accumulate = true;
  op.bytes = elem * (m * k + k * n) + 8.0 * m * n;
  return op;
}

Op memory_op(const std::string& name, double bytes, const std::string& kernel = "") {
  Op op;
  op.name = name;
  op.kernel = kernel.empty() ? name : kernel;
  op.kind = OpKind::memory;
  op.bytes = bytes;
  return op;
}

// Memory-bound ops are timed at the rates calibrated for the model's hidden size.
LayerOps with_width(LayerOps L, double hidden) {
  for (auto* list : {&L.forward, &L.backward, &L.recompute})
    for (Op& op : *list)
      if (op.kind == OpKind::memory) op.width = hidden;
  return L;
}

Op with_comm(Op op, TpComm comm, double bytes) {
  op.comm = comm;
  op.comm_bytes = bytes;
  return op;
}


}  // namespace

const char* to_string(TpComm c) {
  switch (c) {
    case TpComm::none: return "none";
    case TpComm::all_reduce: return "all_reduce";
    case TpComm::all_gather: return "all_gather";
    case TpComm::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

double total_flops(const std::vector<Op>& ops) {
  double f = 0;
  for (const auto& op : ops) f += op.flops;
  return f;
}

LayerOps transformer_layer_ops(const OpContext& c) {
  const ModelConfig& m = c.model;
  const double e = activation_bytes(c.precision);
  const double t = c.tp;
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  const double h = m.hidden, f = m.ffn_hidden, kv = m.kv_hidden();
  const double s = m.seq_len, b = c.micro_batch, a = m.heads;
  const bool gpt = m.family == Family::gpt;
  const bool sp = c.sequence_parallel && c.tp > 1;
  // Elementwise ops outside the TP regions run on the full sequence, or on 1/t of it with SP.
  const double rep = sp ? tokens / t : tokens;
  const double act = tokens * h * e;  // one full hidden-state activation, bytes

  // Collectives around the two TP regions (Megatron-LM): without SP an all-reduce after each row-
  // parallel GEMM; with SP an all-gather before each column-parallel GEMM and a reduce-scatter after
  // each row-parallel one. Backward mirrors them.
  const bool tpc = c.tp > 1;
  const TpComm enter_fwd = (tpc && sp) ? TpComm::all_gather : TpComm::none;
  const TpComm exit_fwd = !tpc ? TpComm::none : (sp ? TpComm::reduce_scatter : TpComm::all_reduce);

  LayerOps L;
  auto& F = L.forward;
  const double norm_bytes = 2.0 * rep * h * e;  // read x, write y
  F.push_back(with_comm(memory_op(gpt ? "ln1" : "rmsnorm1", norm_bytes, gpt ? "layernorm" : "rmsnorm"), enter_fwd, act));
  Op qkv = gemm("qkv", tokens, (h + 2.0 * kv) / t, h, e);
  F.push_back(qkv);
  // The split into per-head Q, K, V (read and write the QKV activation once; gpt adds the bias on
  // the way); llama then rotates Q and K in place.
  if (gpt) F.push_back(memory_op("qkv_bias_split", 2.0 * tokens * (h + 2.0 * kv) / t * e));
  else F.push_back(memory_op("qkv_split", 2.0 * tokens * (h + 2.0 * kv) / t * e));
  if (!gpt) F.push_back(memory_op("rope", 2.0 * tokens * (h + kv) / t * e));
  Op attn;
  attn.name = "attention";
  attn.kind = OpKind::attention;
  // QK^T and AV: 2 * 2*b*s*s*(h/t) FLOPs, counted over the full square; what an implementation
  // saves with a causal mask shows up in its measured rate (the profile's attention fraction).
  attn.flops = 4.0 * b * s * s * h / t;
  attn.bytes = e * tokens * (2.0 * h + 2.0 * kv) / t;  // read Q, K, V, write O
  attn.m = b * a / t;  // batch x heads on this rank, sequence, head size: the shape that sets its rate
  attn.n = s;
  attn.k = m.head_dim();
  attn.kv_group = static_cast<double>(m.heads) / m.kv_heads;
  attn.dropout = gpt;
  F.push_back(attn);
  F.push_back(memory_op("attention_merge_heads", 2.0 * tokens * h / t * e));
  Op proj = gemm("attn_out", tokens, h, h / t, e);
  F.push_back(with_comm(proj, exit_fwd, act));
  if (gpt) F.push_back(memory_op("dropout_residual1", rep * h * (3.0 * e + 1.0), "bias_dropout_residual"));
  else F.push_back(memory_op("residual1", 3.0 * rep * h * e, "residual"));
  F.push_back(with_comm(memory_op(gpt ? "ln2" : "rmsnorm2", norm_bytes, gpt ? "layernorm" : "rmsnorm"), enter_fwd, act));
  Op fc1 = gemm(gpt ? "fc1" : "gate_up", tokens, (gpt ? f : 2.0 * f) / t, h, e);
  F.push_back(fc1);
  if (gpt) F.push_back(memory_op("bias_gelu", 3.0 * tokens * f / t * e));  // read x, write GELU input and output
  else F.push_back(memory_op("swiglu", 3.0 * tokens * f / t * e));
  Op fc2 = gemm(gpt ? "fc2" : "down", tokens, h, f / t, e);
  F.push_back(with_comm(fc2, exit_fwd, act));
  if (gpt) F.push_back(memory_op("dropout_residual2", rep * h * (3.0 * e + 1.0), "bias_dropout_residual"));
  else F.push_back(memory_op("residual2", 3.0 * rep * h * e, "residual"));

  // Backward in reverse order. The activation-gradient collectives: without SP an all-reduce after
  // the column-parallel dgrads (qkv, fc1); with SP a reduce-scatter there and an all-gather of the
  // saved norm output before the row-parallel region's wgrad.
  auto& B = L.backward;
  const TpComm exit_bwd = exit_fwd;
  const TpComm enter_bwd = enter_fwd;
  // gpt: the dropout's backward and the bias gradient. A residual add has no backward kernel of its
  // own: the branch takes the incoming gradient as it is, and the two paths are summed after the
  // norm's backward (counted there).
  if (gpt) B.push_back(memory_op("dropout_residual2.bwd", rep * h * (3.0 * e + 1.0), "dropout_residual.bwd"));
  {
    Op g = gemm("fc2.dgrad", fc2.m, fc2.k, fc2.n, e);
    B.push_back(with_comm(g, enter_bwd, act));
    B.push_back(weight_gradient("fc2.wgrad", fc2.k, fc2.n, fc2.m, e));
  }
  // GELU backward reads the gradient and the GELU input and writes one gradient; gpt then sums the
  // gradient over tokens for the bias.
  B.push_back(memory_op(gpt ? "gelu_bias.bwd" : "swiglu.bwd", (gpt ? 4.0 : 5.0) * tokens * f / t * e));
  {
    Op g = gemm(fc1.name + ".dgrad", fc1.m, fc1.k, fc1.n, e);
    B.push_back(with_comm(g, exit_bwd, act));
    B.push_back(weight_gradient(fc1.name + ".wgrad", fc1.k, fc1.n, fc1.m, e));
  }
  B.push_back(memory_op(gpt ? "ln2.bwd" : "rmsnorm2.bwd", (gpt ? kLayerNormBackwardPasses : 2.0) * norm_bytes,
                        gpt ? "layernorm.bwd" : "rmsnorm.bwd"));
  if (gpt) B.push_back(memory_op("dropout_residual1.bwd", rep * h * (3.0 * e + 1.0), "dropout_residual.bwd"));
  {
    Op g = gemm("attn_out.dgrad", proj.m, proj.k, proj.n, e);
    B.push_back(with_comm(g, enter_bwd, act));
    B.push_back(weight_gradient("attn_out.wgrad", proj.k, proj.n, proj.m, e));
  }
  Op attn_b = attn;
  attn_b.name = "attention.bwd";
  // Backward: dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: four matmuls against two.
  attn_b.flops = attn.flops * 2.0;
  attn_b.bytes = attn.bytes * 2.0;
  B.push_back(memory_op("attention_split_heads.bwd", 2.0 * tokens * h / t * e));
  B.push_back(attn_b);
  if (!gpt) B.push_back(memory_op("rope.bwd", 2.0 * tokens * (h + kv) / t * e));
  // Merge dQ, dK, dV into the QKV gradient (read + write); gpt also sums it over tokens for the bias.
  if (gpt) B.push_back(memory_op("qkv_merge_bias.bwd", 3.0 * tokens * (h + 2.0 * kv) / t * e));
  else B.push_back(memory_op("qkv_merge.bwd", 2.0 * tokens * (h + 2.0 * kv) / t * e));
  {
    Op g = gemm("qkv.dgrad", qkv.m, qkv.k, qkv.n, e);
    B.push_back(with_comm(g, exit_bwd, act));
    B.push_back(weight_gradient("qkv.wgrad", qkv.k, qkv.n, qkv.m, e));
  }
  B.push_back(memory_op(gpt ? "ln1.bwd" : "rmsnorm1.bwd", (gpt ? kLayerNormBackwardPasses : 2.0) * norm_bytes,
                        gpt ? "layernorm.bwd" : "rmsnorm.bwd"));

  if (c.recompute == Recompute::full) {
    L.recompute = F;
    for (auto& op : L.recompute) op.name += ".recompute";
  } else if (c.recompute == Recompute::selective) {
    Op r = attn;
    r.name = "attention.recompute";
    L.recompute.push_back(r);
  }
  return with_width(std::move(L), c.model.hidden);
}

LayerOps embedding_ops(const OpContext& c) {
  const ModelConfig& m = c.model;
  const double e = activation_bytes(c.precision);
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  const double h = m.hidden;
  LayerOps L;
  // Vocabulary-parallel lookup writes the full activation on every TP rank, then an all-reduce (or
  // reduce-scatter with SP) combines the partial lookups.
  const bool tpc = c.tp > 1;
  const TpComm comm = !tpc ? TpComm::none : (c.sequence_parallel ? TpComm::reduce_scatter : TpComm::all_reduce);
  // Gather token and position rows and write the sum (gpt: through dropout, with its 1-byte mask).
  const bool gpt = m.family == Family::gpt;
  L.forward.push_back(with_comm(memory_op("embedding", tokens * h * (3.0 * e + (gpt ? 1.0 : 0.0))), comm, tokens * h * e));
  // Scatter-add into fp32 token (and position) gradients: read the gradient, read-modify-write 4 bytes each.
  L.backward.push_back(memory_op("embedding.bwd", tokens * h * (e + (gpt ? 1.0 : 0.0) + (gpt ? 16.0 : 8.0))));
  return with_width(std::move(L), c.model.hidden);
}

LayerOps head_ops(const OpContext& c) {
  const ModelConfig& m = c.model;
  const double e = activation_bytes(c.precision);
  const double t = c.tp;
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  const double h = m.hidden, v = m.vocab;
  const bool sp = c.sequence_parallel && c.tp > 1;
  const double rep = sp ? tokens / t : tokens;
  LayerOps L;
  const TpComm enter = (c.tp > 1 && sp) ? TpComm::all_gather : TpComm::none;
  L.forward.push_back(with_comm(memory_op("final_norm", 2.0 * rep * h * e, m.family == Family::gpt ? "layernorm" : "rmsnorm"), enter,
                                tokens * h * e));
  Op logits = gemm("logits", tokens, v / t, h, e);
  L.forward.push_back(logits);
  // Cross-entropy in fp32 (vocab-parallel): read the bf16 logits and write an fp32 copy, read it
  // twice more (sum of exponentials, gradient), and write the gradient over the bf16 logits.
  L.forward.push_back(memory_op("cross_entropy", tokens * v / t * (2.0 * e + 12.0)));
  Op dg = gemm("logits.dgrad", logits.m, logits.k, logits.n, e);
  const TpComm exit = c.tp <= 1 ? TpComm::none : (sp ? TpComm::reduce_scatter : TpComm::all_reduce);
  L.backward.push_back(with_comm(dg, exit, tokens * h * e));
  // The output layer's weight is kept vocabulary-major, [V/t, h] (the word embedding's layout,
  // tied or not, as Megatron-LM and the step runner keep it), so its gradient is dlogits^T x input:
  // a (V/t) x h x tokens GEMM, not the h x (V/t) one of a layer weight kept input-major.
  L.backward.push_back(weight_gradient("logits.wgrad", logits.n, logits.k, logits.m, e));
  L.backward.push_back(memory_op("final_norm.bwd", (m.family == Family::gpt ? kLayerNormBackwardPasses : 2.0) * 2.0 * rep * h * e,
                                 m.family == Family::gpt ? "layernorm.bwd" : "rmsnorm.bwd"));
  return with_width(std::move(L), c.model.hidden);
}

}  // namespace trainsim
