#include "layout_rules.h"

namespace trainsim {

int microbatches_per_step(const Layout& l, int global_batch) { return global_batch / (l.dp * l.micro_batch); }

std::string layout_violation(const ModelConfig& m, const Layout& l, int global_batch, int gpus, int gpus_per_node,
                             bool allow_tp_across_nodes) {
  auto s = [](long v) { return std::to_string(v); };
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.vpp < 1 || l.micro_batch < 1) return "every degree must be at least 1";
  if (static_cast<long>(l.tp) * l.pp * l.dp != gpus)
    return "tp x pp x dp = " + s(static_cast<long>(l.tp) * l.pp * l.dp) + " but the cluster has " + s(gpus) + " GPUs";
  if (m.heads % l.tp != 0) return "tp=" + s(l.tp) + " does not divide the " + s(m.heads) + " attention heads";
  if (m.kv_heads % l.tp != 0 && l.tp % m.kv_heads != 0)
    return "tp=" + s(l.tp) + " and the " + s(m.kv_heads) + " key/value heads do not divide one another";
  if (m.ffn_hidden % l.tp != 0) return "tp=" + s(l.tp) + " does not divide ffn_hidden " + s(m.ffn_hidden);
  if (!allow_tp_across_nodes && l.tp > gpus_per_node)
    return "tp=" + s(l.tp) + " would span nodes of " + s(gpus_per_node) + " GPUs";
  if (gpus_per_node % l.tp != 0 && l.tp < gpus_per_node)
    return "tp=" + s(l.tp) + " does not divide the " + s(gpus_per_node) + " GPUs of a node";
  if (l.sequence_parallel && l.tp == 1) return "sequence parallelism needs tp > 1";
  if (l.pp * l.vpp > m.layers)
    return "pp x vpp = " + s(l.pp * l.vpp) + " stages but the model has " + s(m.layers) + " layers";
  if (l.schedule == Schedule::interleaved) {
    if (l.pp < 2) return "the interleaved schedule needs pp >= 2";
    if (l.vpp < 2) return "the interleaved schedule needs vpp >= 2";
    if (m.layers % (l.pp * l.vpp) != 0)
      return "the interleaved schedule needs layers (" + s(m.layers) + ") divisible by pp x vpp (" + s(l.pp * l.vpp) + ")";
  } else if (l.vpp != 1) {
    return "vpp=" + s(l.vpp) + " needs the interleaved schedule";
  }
  if (global_batch % (l.dp * l.micro_batch) != 0)
    return "global batch " + s(global_batch) + " is not divisible by dp x micro_batch = " + s(l.dp * l.micro_batch);
  const int mbs = microbatches_per_step(l, global_batch);
  if (l.schedule == Schedule::interleaved && mbs % l.pp != 0)
    return "the interleaved schedule needs micro-batches per step (" + s(mbs) + ") divisible by pp (" + s(l.pp) + ")";
  if (l.zero < 0 || l.zero > 3) return "zero must be 0, 1, 2 or 3";
  if (l.zero >= 2 && l.pp > 1) return "ZeRO-" + s(l.zero) + " with pipeline parallelism is not supported by DeepSpeed or Megatron";
  if (l.bucket_MB <= 0) return "bucket_MB must be positive";
  return "";
}

}  // namespace trainsim
