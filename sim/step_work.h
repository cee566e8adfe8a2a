#pragma once
// The work of a step on one rank, before any of it is placed on the engine: a layer's, the
// embedding's and the head's compute time and tensor-parallel traffic for one micro-batch, and
// from them each model chunk's (the layers of one virtual stage), with the gradients and
// parameters it holds.
#include <vector>

#include "layer_ops.h"
#include "step_builder.h"

namespace trainsim::sim {

struct CommTotals {
  double bytes[3] = {0, 0, 0};  // all_reduce, all_gather, reduce_scatter
  int count[3] = {0, 0, 0};
  bool empty() const { return count[0] + count[1] + count[2] == 0; }
};

// Adds `times` calls of an op's TP collective (if it has one) to `t`.
void add_comm(CommTotals& t, const Op& op, double times);
void add_totals(CommTotals& t, const CommTotals& x);

// A layer's, the embedding's and the head's compute time and TP traffic for one micro-batch on
// one rank. They depend only on the model, the TP degree, sequence parallelism, recompute, the
// micro-batch, the precision and the cost model, so the layouts of a search that share those
// share them.
struct LayerCosts {
  double layer_fwd_s = 0, layer_bwd_s = 0, layer_recompute_s = 0;
  CommTotals layer_fwd, layer_bwd, layer_recompute;
  struct Part {
    double fwd_s = 0, bwd_s = 0;
    CommTotals fwd, bwd;
  } embedding, head;
};

// Work of one model chunk (the layers of one virtual stage) for one micro-batch on one rank.
struct ChunkWork {
  int layers = 0;
  double fwd_s = 0, bwd_s = 0, recompute_s = 0;
  CommTotals tp_fwd, tp_bwd, tp_recompute;
  double layer_bwd_s = 0;       // one layer's backward (for bucketed last backward)
  CommTotals tp_layer_bwd;
  double extra_bwd_s = 0;       // embedding / head backward on top of the layers
  CommTotals tp_extra_bwd;
  double grad_bytes_per_layer = 0;  // fp32 gradients of one layer on one rank
  // The same by parameter tensor, in the order backward completes them (MLP down projection,
  // MLP up projection(s), attention output, fused QKV, then biases and norms): buckets are filled
  // tensor by tensor, as PyTorch DDP and Megatron-LM fill them.
  std::vector<double> layer_tensor_bytes;
  double extra_grad_bytes = 0;      // embedding / head gradients
  double params_per_rank = 0;       // for ZeRO-3 gathers
  // ZeRO-3 gathers a layer's parameters ahead of its forward and of its backward, and the
  // embedding and head parameters once per step.
  double layer_params_per_rank = 0;
  double layer_fwd_s = 0, extra_fwd_s = 0;
  CommTotals tp_layer_fwd, tp_extra_fwd;
};

// The ops' compute time on the cost model, summed.
double ops_time(const CostModel& c, const std::vector<Op>& ops);

// A layer's, the embedding's and the head's costs for this step's model, TP degree, sequence
// parallelism, recompute, micro-batch, precision and cost model, from a per-thread cache keyed by
// all of them.
const LayerCosts& layer_costs(const StepInput& in);
// Every chunk's work, [stage * vpp + chunk], for `vpp` virtual stages per pipeline stage.
void chunk_work(const StepInput& in, int vpp, std::vector<ChunkWork>& chunks);

}  // namespace trainsim::sim
