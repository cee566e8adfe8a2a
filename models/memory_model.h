#pragma once
#include <cstdint>
#include <vector>

#include "layout.h"
#include "model_config.h"
#include "precision.h"

namespace trainsim {

// Activation bytes one transformer layer keeps for backward, per micro-batch, on one TP rank
// (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", section
// 4, generalised to grouped-query attention, SwiGLU and dropout-free llama layers).
struct LayerActivation {
  double replicated = 0;  // kept whole on every TP rank unless sequence parallelism shards it
  double sharded = 0;     // split over TP ranks
  double attention_scores = 0;  // the s^2 terms: softmax output, dropout mask and output (split over TP)
  double layer_input = 0; // what full recompute keeps: the layer's input
  double total = 0;       // what the layer keeps under the given recompute policy
};
LayerActivation layer_activation_bytes(const ModelConfig& m, int tp, bool sequence_parallel,
                                        Recompute r, int micro_batch);

// Micro-batches (interleaved: micro-batch chunks of layers/(pp*vpp) layers) whose activations a
// pipeline stage holds at its peak. GPipe: all m. 1F1B: min(p - stage, m). Interleaved
// (Megatron-LM's warm-up): min(2(p - stage - 1) + (v - 1)p + 1, m v) chunks.
int inflight_microbatches(Schedule s, int pp, int vpp, int microbatches, int stage);

struct MemoryBreakdown {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double buffers_bytes = 0;    // gradient buckets, ZeRO-3 gathered parameters, compression buffers,
                               // one layer's backward working set
  double workspace_bytes = 0;  // the stated allowance: context, library workspaces, fragmentation
  double peak_bytes = 0;
};

struct MemoryInput {
  const ModelConfig& model;
  Layout layout;
  Precision precision = Precision::bf16;
  int global_batch = 1;
  double device_bytes = 0;
};

struct MemoryResult {
  std::vector<MemoryBreakdown> per_stage;
  int peak_stage = 0;
  double device_bytes = 0;
  bool oom = false;
  const MemoryBreakdown& peak() const { return per_stage[peak_stage]; }
};

// Layers held by pipeline stage `stage` (Megatron's even split; the remainder goes to the middle).
int layers_on_stage(int layers, int pp, int stage);
// Parameters one rank of stage `stage` holds before ZeRO-3 sharding (matrices split over TP).
double stage_params_per_rank(const ModelConfig& m, int tp, int pp, int stage);

MemoryResult estimate_memory(const MemoryInput& in);

// The fixed part of the workspace allowance: CUDA context, cuBLAS workspaces and NCCL channel
// buffers; and the fragmentation fraction applied to activations and buffers.
inline constexpr double kFixedWorkspaceBytes = 1.0 * (1ull << 30);
inline constexpr double kFragmentationFraction = 0.05;

}  // namespace trainsim
