#pragma once
#include <vector>

#include "measurements.h"

namespace trainsim::gpu {

struct GemmShape {
  int m, n, k;
};

// The shapes transformer layers produce (QKV, attention output, MLP up/down, their backward
// dgrad/wgrad), for hidden sizes of the preset models, token counts and TP splits.
std::vector<GemmShape> transformer_gemm_shapes(bool quick);

// Times cuBLASLt matmuls (TN layout, fp32 accumulate) on random data; fp8 outputs bf16.
std::vector<GemmSample> bench_gemms(const std::vector<GemmShape>& shapes, const char* dtype, int device_cc_major);
// Relative error of a 256^3 bf16 cuBLASLt GEMM against a double-precision CPU reference.
double check_gemm_bf16();

}  // namespace trainsim::gpu
