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
  double runtime_bytes = 0;    // outside the framework's tensors: the CUDA context with cuBLAS and
                               // the loaded kernels, and NCCL's buffers for each communicator
  int nccl_communicators = 0;  // communicators this rank creates (see nccl_communicators())
  bool runtime_measured = false;  // runtime_bytes from the profile's measurement, not the fixed allowance
  double fragmentation_bytes = 0;  // a caching allocator's slack over activations and buffers
  double workspace_bytes = 0;  // runtime_bytes + fragmentation_bytes
  double peak_bytes = 0;
  // What a runner that allocates the counted tensors in one exact arena (no caching allocator)
  // holds at its peak: the peak less the fragmentation allowance.
  double arena_peak_bytes() const { return peak_bytes - fragmentation_bytes; }
};

// Device memory a rank holds besides its tensors, from the hardware profile. With context_bytes 0
// (a profile that measured none) the model charges the fixed allowance kFixedWorkspaceBytes.
struct RuntimeMemory {
  double context_bytes = 0;                   // CUDA context, cuBLAS and loaded kernels
  double nccl_first_communicator_bytes = 0;   // the first NCCL communicator a rank creates
  double nccl_further_communicator_bytes = 0; // each one after it
};

struct MemoryInput {
  const ModelConfig& model;
  Layout layout;
  Precision precision = Precision::bf16;
  int global_batch = 1;
  double device_bytes = 0;
  RuntimeMemory runtime{};
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

// NCCL communicators a rank of pipeline stage `stage` creates, as Megatron-LM's groups and this
// project's runner create them: the world (when there is more than one GPU), then one per group of
// more than one rank it belongs to: tensor parallel, data parallel (the world itself when the
// layout is data parallel only), pipeline, and on the first and last stage the embedding group.
int nccl_communicators(const Layout& l, int stage);

// The allowance for a profile that measured no runtime memory: CUDA context, cuBLAS workspaces and
// NCCL channel buffers together; and the fragmentation fraction applied to activations and buffers.
inline constexpr double kFixedWorkspaceBytes = 1.0 * (1ull << 30);
inline constexpr double kFragmentationFraction = 0.05;

}  // namespace trainsim
