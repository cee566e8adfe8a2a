#pragma once
// Element-wise kernels timed inside a sustained mix with tensor-core work (GEMMs or attention), at
// set shares of its time: how much slower they run as its power draw pulls the SM clock down. A
// training step is such a mix; calibrate times its element-wise kernels in short bursts at the full
// clock.
#include <string>
#include <vector>

namespace trainsim::gpu {

// The tensor-core work of the mix: a bf16 GEMM gm x gn x gk (row-major, no transposes,
// training-magnitude operands), or the unfused causal attention's forward then backward over
// `batch` sequences without dropout, as a Llama layer runs it (kernels/attention.h).
struct KernelMixLoad {
  bool attention = false;
  int gm = 4096, gn = 11008, gk = 4096;
  int batch = 1, heads = 32, seq = 2048, head_dim = 128, kv_group = 4;
};

// The layer whose element-wise kernels run in the mix: `tokens` rows of `hidden` (sequences of
// min(tokens, 2,048)). Llama-style (the default): heads of 128 from hidden 2,048 up, else of 64,
// four query heads per K/V head where the heads divide by four, a SwiGLU of width `ffn`; its
// kernels RMSNorm, the Q/K/V split, rotary positions, the residual add and the SwiGLU, each with
// its backward where it has one. GPT-style (`gpt`): heads of 64, an MLP of width `ffn`; its kernels
// as the runner calls them in one layer, under the cost model's names: LayerNorm twice and its
// backward twice, the Q/K/V split with bias and its merge with the bias gradient, the heads'
// merge and split, bias-dropout-residual twice and the dropout's backward twice, bias-GeLU and
// its backward with the bias gradient. The default is Llama 2 7B at 4,096 tokens; a small model's
// tensors fit in L2, a large one's do not.
struct ElementwiseLayer {
  int tokens = 4096, hidden = 4096, ffn = 11008;
  bool gpt = false;
  int seq() const { return tokens < 2048 ? tokens : 2048; }
  int head_dim() const { return !gpt && hidden >= 2048 && hidden % 128 == 0 ? 128 : 64; }
  int heads() const { return hidden / head_dim(); }
  int kv_heads() const { return !gpt && heads() % 4 == 0 ? heads() / 4 : heads(); }
};

struct KernelMixPoint {
  double target_share = 0;   // the load's share of a cycle aimed at, from the times alone
  int loads = 0, groups = 0; // per cycle: load calls back to back, then groups of the element-wise kernels
  double load_share = 0;     // the load's share of the timed cycles, measured
  double load_us = 0;        // median time of one load call in the mix (0: none run)
  std::vector<double> kernel_us;  // median time of one call of each kernel in the mix (empty: none run)
  int cycles = 0;            // cycles timed
  // The timed phase on the host's wall clock (seconds since the epoch), to match a clock log.
  double wall_begin_s = 0, wall_end_s = 0;
};

struct KernelMixResult {
  std::string load;         // what the load is, in words
  double load_flop = 0;     // per call (attention: the full, non-causal count, as calibrate's)
  int tokens = 0, hidden = 0, ffn = 0;     // the element-wise kernels' shape
  bool gpt = false;                        // a GPT-style layer's kernels (else Llama-style)
  std::vector<std::string> kernels;
  // One call of each between events with nothing else running, as the mix times it (the events'
  // own overhead included), and the load alone; at the full clock, before the mix.
  std::vector<double> alone_us;
  double load_alone_us = 0;
  std::vector<KernelMixPoint> points;
};

// For each share of the load in `shares` (0 to below 1), runs cycles of load calls and element-wise
// kernel groups in those proportions for `settle_s` seconds, untimed (the power limiter settles),
// then `timed_s` seconds with every call between events.
KernelMixResult bench_kernel_mix(const std::vector<double>& shares, double settle_s, double timed_s, const KernelMixLoad& load = {},
                                 const ElementwiseLayer& layer = {});

}  // namespace trainsim::gpu
