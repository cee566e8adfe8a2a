#include "memory_model.h"

#include <algorithm>

#include "input_error.h"

namespace trainsim {

LayerActivation layer_activation_bytes(const ModelConfig& m, int tp, bool sequence_parallel,
                                        Recompute r, int micro_batch) {
  const double sb = static_cast<double>(m.seq_len) * micro_batch;
  const double h = m.hidden, f = m.ffn_hidden, kv = m.kv_hidden(), a = m.heads, s = m.seq_len;
  const double t = tp;
  const bool gpt = m.family == Family::gpt;
  const bool sp = sequence_parallel && tp > 1;
  LayerActivation act;
  // Per token, in bytes (bf16 activations, 1-byte dropout masks):
  // replicated: norm1 input 2h, QKV input 2h, norm2 input 2h, MLP input 2h, and for gpt the two
  //             dropout masks h + h                                   -> gpt 10h, llama 8h
  // sharded:    Q and K 2h + 2kv, V 2kv, attention-output-projection input 2h,
  //             MLP: gpt GELU input 2f and fc2 input 2f; llama gate and up outputs 4f and down input 2f
  //                                                                   -> gpt (f = 4h) 24h
  // scores:     softmax output 2as, and for gpt its dropout mask as and dropout output 2as -> gpt 5as
  const double replicated = sb * (8.0 * h + (gpt ? 2.0 * h : 0.0));
  const double sharded = sb * (2.0 * h + 2.0 * kv + 2.0 * kv + 2.0 * h + (gpt ? 4.0 * f : 6.0 * f));
  const double scores = sb * (gpt ? 5.0 : 2.0) * a * s;
  act.replicated = sp ? replicated / t : replicated;
  act.sharded = sharded / t;
  act.attention_scores = scores / t;
  act.layer_input = sb * 2.0 * h / (sp ? t : 1.0);
  switch (r) {
    case Recompute::none: act.total = act.replicated + act.sharded + act.attention_scores; break;
    case Recompute::selective: act.total = act.replicated + act.sharded; break;
    case Recompute::full: act.total = act.layer_input; break;
  }
  return act;
}

int inflight_microbatches(Schedule s, int pp, int vpp, int microbatches, int stage) {
  switch (s) {
    case Schedule::gpipe: return microbatches;
    case Schedule::one_f_one_b: return std::min(pp - stage, microbatches);
    case Schedule::interleaved:
      if (microbatches == pp) return microbatches * vpp;  // every forward first (Megatron-LM)
      return std::min(2 * (pp - stage - 1) + (vpp - 1) * pp + 1, microbatches * vpp);
  }
  return microbatches;
}

int layers_on_stage(int layers, int pp, int stage) {
  const int base = layers / pp, extra = layers % pp;
  // Remainder layers go to the middle stages, which carry neither embedding nor logits.
  const int first_extra = (pp - extra) / 2;
  return base + ((stage >= first_extra && stage < first_extra + extra) ? 1 : 0);
}

double stage_params_per_rank(const ModelConfig& m, int tp, int pp, int stage) {
  const ParamCount pc = count_params(m);
  const double h = m.hidden;
  // Norm weights (and gpt's row-parallel output biases) are replicated over TP; the rest splits.
  const double norm_per_layer = m.family == Family::gpt ? 4.0 * h + 2.0 * h : 2.0 * h;
  const double layer = (pc.per_layer - norm_per_layer) / tp + norm_per_layer;
  double p = layer * layers_on_stage(m.layers, pp, stage);
  if (stage == 0) p += static_cast<double>(pc.embedding) / tp;
  if (stage == pp - 1) {
    p += static_cast<double>(pc.final_norm);
    // Tied embeddings: the last stage keeps its own copy of the word embedding for the logits
    // when pp > 1 (Megatron-LM), kept in sync by an all-reduce.
    if (m.tied_embeddings) {
      if (pp > 1) p += static_cast<double>(m.vocab) * m.hidden / tp;
    } else {
      p += static_cast<double>(pc.lm_head) / tp;
    }
  }
  return p;
}

int nccl_communicators(const Layout& l, int stage) {
  const int gpus = l.tp * l.pp * l.dp;
  if (gpus == 1) return 0;
  if (l.tp == 1 && l.pp == 1) return 1;  // the world is the data-parallel group
  int n = 1;
  if (l.tp > 1) ++n;
  if (l.dp > 1) ++n;
  if (l.pp > 1) n += (stage == 0 || stage == l.pp - 1) ? 2 : 1;
  return n;
}

MemoryResult estimate_memory(const MemoryInput& in) {
  const ModelConfig& m = in.model;
  const Layout& L = in.layout;
  const int dp = L.dp;
  const int microbatches = std::max(1, in.global_batch / (dp * L.micro_batch));
  const double e = activation_bytes(in.precision);
  MemoryResult res;
  res.device_bytes = in.device_bytes;
  res.per_stage.resize(L.pp);
  const LayerActivation la = layer_activation_bytes(m, L.tp, L.sequence_parallel, L.recompute, L.micro_batch);
  const LayerActivation la_none = layer_activation_bytes(m, L.tp, L.sequence_parallel, Recompute::none, L.micro_batch);
  const double tokens = static_cast<double>(m.seq_len) * L.micro_batch;
  const int vpp = L.schedule == Schedule::interleaved ? L.vpp : 1;
  for (int stage = 0; stage < L.pp; ++stage) {
    MemoryBreakdown& mb = res.per_stage[stage];
    const double phi = stage_params_per_rank(m, L.tp, L.pp, stage);
    // Mixed-precision Adam as Megatron-LM runs it: 2 bytes of bf16/fp16 weights, 4 of fp32 main
    // gradients (accumulated and reduced in fp32) and 12 of fp32 master weights, momentum and
    // variance per parameter: 18 bytes (the ZeRO paper's 16 with fp16 gradients).
    double weights = 2.0 * phi, grads = 4.0 * phi, opt = 12.0 * phi;
    if (L.zero >= 1) opt /= dp;
    if (L.zero >= 2) grads /= dp;
    if (L.zero >= 3) weights /= dp;
    mb.params_bytes = weights;
    mb.grads_bytes = grads;
    mb.optimizer_bytes = opt;

    const int layers = layers_on_stage(m.layers, L.pp, stage);
    const int inflight = inflight_microbatches(L.schedule, L.pp, vpp, microbatches, stage);
    // Interleaved in-flight counts are in chunks of layers/vpp layers.
    const double layers_per_unit = static_cast<double>(layers) / vpp;
    double act = inflight * layers_per_unit * la.total;
    // Full recompute rebuilds one layer's activations at a time during backward.
    if (L.recompute == Recompute::full) act += la_none.total - la.total;
    // First stage: gpt's embedding dropout mask, for each in-flight micro-batch; last stage: the
    // logits in bf16 and the fp32 copy the cross-entropy keeps.
    const double t = L.tp;
    if (stage == 0 && m.family == Family::gpt)
      act += inflight * tokens * m.hidden / (L.sequence_parallel ? t : 1.0);
    // The head's state is held only by micro-batches between the last chunk's forward and backward.
    const int head_inflight = L.schedule != Schedule::interleaved ? inflight_microbatches(L.schedule, L.pp, vpp, microbatches, L.pp - 1)
                              : microbatches == L.pp                  ? microbatches
                                                                       : 1;
    if (stage == L.pp - 1) act += head_inflight * tokens * m.vocab / t * (e + 4.0);
    // Selective recompute rebuilds one layer's attention scores at a time during backward.
    if (L.recompute == Recompute::selective) act += la_none.attention_scores;
    // Last stage: the final norm's input and output.
    if (stage == L.pp - 1) act += head_inflight * tokens * 4.0 * m.hidden / (L.sequence_parallel ? t : 1.0);

    mb.activations_bytes = act;

    // Buffers: DDP keeps two gradient buckets in flight; ZeRO-3 gathers one layer's parameters and
    // prefetches the next; compressed gradients get a staging buffer the size of a bucket.
    const double bucket = L.bucket_MB * 1e6;
    double buffers = dp > 1 ? 2.0 * bucket : 0.0;
    if (L.zero >= 3 && dp > 1) buffers += 2.0 * 2.0 * (static_cast<double>(count_params(m).per_layer) / t);
    if (L.compression.kind != Compression::Kind::none && dp > 1) buffers += bucket;
    // Top-K with error feedback keeps what it did not send, an fp32 value per gradient element.
    if (L.compression.kind == Compression::Kind::topk && dp > 1) buffers += 4.0 * phi;
    // One layer's backward working set, per token: GEMM outputs before their element-wise epilogue
    // (the wider of QKV and the MLP, plus one hidden-sized), the gradients of the layer's
    // activations (three residual-stream tensors, Q, K, V and the attention context, the MLP
    // hidden) and the attention-score gradient.
    {
      const double h = m.hidden, kv = m.kv_hidden(), fw = m.family == Family::gpt ? m.ffn_hidden : 2.0 * m.ffn_hidden;
      const double rep_div = L.sequence_parallel ? t : 1.0;
      const double per_token = 2.0 * std::max(h + 2.0 * kv, fw) / t + 2.0 * h / t + 3.0 * 2.0 * h / rep_div +
                               4.0 * 2.0 * h / t + 2.0 * fw / t + 2.0 * m.heads * m.seq_len / t;
      buffers += tokens * per_token;
    }
    mb.buffers_bytes = buffers;
    const RuntimeMemory& rt = in.runtime;
    mb.nccl_communicators = nccl_communicators(L, stage);
    mb.runtime_measured = rt.context_bytes > 0;
    if (mb.runtime_measured) {
      const int n = mb.nccl_communicators;
      mb.runtime_bytes = rt.context_bytes + (n > 0 ? rt.nccl_first_communicator_bytes + (n - 1) * rt.nccl_further_communicator_bytes : 0.0);
    } else {
      mb.runtime_bytes = kFixedWorkspaceBytes;
    }
    mb.fragmentation_bytes = kFragmentationFraction * (act + buffers);
    mb.workspace_bytes = mb.runtime_bytes + mb.fragmentation_bytes;
    mb.peak_bytes = weights + grads + opt + act + buffers + mb.workspace_bytes;
  }
  for (int s = 1; s < L.pp; ++s)
    if (res.per_stage[s].peak_bytes > res.per_stage[res.peak_stage].peak_bytes) res.peak_stage = s;
  res.oom = in.device_bytes > 0 && res.peak().peak_bytes > in.device_bytes;
  return res;
}

}  // namespace trainsim
