#pragma once
// calibrate's diagnostics: GPU measurements that explain a gap between the model and a real step,
// printed as tables. None writes a profile. Each returns calibrate's exit code (1 without a CUDA
// build or device); bad options throw InputError naming the flag, before anything is measured.
#include <string>
#include <vector>

#include "gemm_shapes.h"

namespace trainsim::calib {

// The GEMMs of a few GPT layers (or the shapes given) with random or training-like operands, back
// to back or between memory-bound kernels, accumulated into fp32, as calibrate's table times them,
// and, with idle_ms > 0, one at a time after the GPU has been idle that long.
struct GemmConditionsOptions {
  std::vector<std::string> shapes;  // "m,n,k" or "m,n,k,ta,tb" (0 or 1): row-major C = op(A) op(B)
  double idle_ms = 0;
};
// Parsed shapes (the default list when none is given); throws InputError naming the bad --shape.
std::vector<GemmUse> parse_gemm_condition_shapes(const GemmConditionsOptions& o);
int run_gemm_conditions(const GemmConditionsOptions& o);

// The step's element-wise and row-wise kernels back to back (as calibrate records them), one call
// between events, with operands evicted from L2, after FMA work, right after sustained GEMMs, and
// back to back on a nearly full device.
int run_kernel_conditions();

// calibrate's attention shapes, forward and backward, timed in calibrate's order, in the reverse
// order and (idle_ms > 0) each alone after the GPU has been idle that long: whether a shape's time
// depends on what was timed before it.
void check_attention_conditions(double idle_ms);
int run_attention_conditions(double idle_ms);

// A Llama-style (or GPT-style) layer's element-wise kernels inside sustained mixes with a bf16 GEMM (or the
// unfused attention) at set shares of their time, against each alone at the full clock.
struct KernelMixOptions {
  std::vector<double> shares{0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95};  // the load's share of each mix, in [0, 1)
  double settle_s = 3, timed_s = 2;  // each mix untimed first, for the power limiter to settle; then timed
  std::vector<int> gemm{4096, 11008, 4096};  // m, n, k: Llama 2 7B's MLP up projection at 4,096 tokens
  std::vector<int> attention;  // instead of a GEMM: batch, heads, seq, head_dim, query heads per K/V head
  std::vector<int> layer{4096, 4096, 11008};  // the element-wise kernels' tokens, hidden, SwiGLU or MLP width (Llama 2 7B at 4,096 tokens)
  std::string layer_kind = "llama";           // whose element-wise kernels: llama or gpt (kernels/kernel_mix.h)
  std::string clock_log;       // nvidia-smi's clock and power log written beside the run, read at its end
};
void check_kernel_mix(const KernelMixOptions& o);
int run_kernel_mix(const KernelMixOptions& o);

}  // namespace trainsim::calib
