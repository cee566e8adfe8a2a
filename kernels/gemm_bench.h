#pragma once
#include <vector>

#include "measurements.h"

namespace trainsim::gpu {

// The shapes transformer layers produce (QKV, attention output, MLP up/down, their backward
// dgrad/wgrad), for hidden sizes of the preset models, token counts and TP splits.
std::vector<GemmShape> transformer_gemm_shapes(bool quick);

// Times cuBLASLt matmuls (fp32 accumulate) on random data: bf16 in each shape's own layout through
// the runner's LtMatmul (and kBf16AccumulateFp32 the same way, into an fp32 output with beta = 1);
// fp16, fp8 (bf16 output) and tf32 in the TN layout.
std::vector<GemmSample> bench_gemms(const std::vector<GemmShape>& shapes, const char* dtype, int device_cc_major);
// One bf16 GEMM shape timed four ways, to see what its throughput depends on: operands uniform in
// [-1, 1] (as bench_gemms) or training-like (activations unit-scale, weights +-0.035, the runner's
// initialisation); back to back, or each GEMM after a memory-bound kernel of similar length (as in a
// training step, where element-wise kernels sit between GEMMs), each GEMM timed by events around it.
struct GemmConditionSample {
  GemmShape shape;
  double us_random_b2b = 0, us_trainlike_b2b = 0, us_random_interleaved = 0, us_trainlike_interleaved = 0;
  // Back to back on training-like operands with an fp32 output accumulated into (beta = 1), as
  // the runner's weight-gradient GEMMs run.
  double us_fp32_accumulate_b2b = 0;
  // One call on training-like operands after the GPU has been idle for idle_ms (0: not timed): a
  // GPU held at its power limit by sustained GEMMs runs its next work at a lower clock than one
  // that has rested.
  double us_trainlike_after_idle = 0;
};
std::vector<GemmConditionSample> bench_gemm_conditions(const std::vector<GemmShape>& shapes, double idle_ms = 0);
// Relative error of a 256^3 bf16 cuBLASLt GEMM against a double-precision CPU reference.
double check_gemm_bf16();

}  // namespace trainsim::gpu
