#pragma once
// Pipeline schedules as the order of forward and backward passes each pipeline stage runs. The
// bubble is not computed here: it emerges when the step builder runs these orders against the
// cross-stage dependencies.
#include <vector>

namespace trainsim::sim {

enum class PipelineKind { gpipe, one_f_one_b, interleaved };

struct PipeOp {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // virtual stage index on this rank (0 .. vpp-1); model chunk = chunk * pp + stage
};

// Order of passes on `stage` of `pp` stages for `m` micro-batches and `vpp` chunks per stage.
// GPipe: all forwards, then all backwards. 1F1B (PipeDream-Flush): pp - stage - 1 warm-up forwards,
// then alternate, then drain. Interleaved (Narayanan et al. 2021, Megatron-LM's order): warm-up of
// 2(pp - stage - 1) + (vpp - 1) pp forwards over micro-batch groups of pp.
std::vector<PipeOp> pipeline_order(PipelineKind kind, int pp, int vpp, int m, int stage);
// The same, from a per-thread cache: a search's layouts share a few (pp, vpp, m) combinations.
const std::vector<PipeOp>& cached_pipeline_order(PipelineKind kind, int pp, int vpp, int m, int stage);

// The forward passes `stage` runs before its first backward in that order (all of them for GPipe).
int pipeline_warmup(PipelineKind kind, int pp, int vpp, int m, int stage);

// Largest number of forward passes whose backward has not yet run, along an order (the activation
// memory a stage must hold, in chunks).
int max_inflight(const std::vector<PipeOp>& order);

}  // namespace trainsim::sim
