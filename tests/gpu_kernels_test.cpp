// GPU kernels against CPU references. Skipped (not failed) where no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compression.h"
#include "cuda_compat.h"
#include "gemm_bench.h"
#include "measurements.h"

using namespace trainsim::gpu;

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible"

TEST(GpuKernels, GemmMatchesCpuReference) {
  REQUIRE_GPU();
  // bf16 operands, fp32 accumulation: relative error between 1e-3 and 1e-2 against float64.
  EXPECT_LT(check_gemm_bf16(), 1e-2);
}

TEST(GpuKernels, Int8RoundTrip) {
  REQUIRE_GPU();
  const size_t n = 1 << 20;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.001 * i) * (1 + (i % 7));
  DeviceBuffer d(n * 4), q(n), s((n / kQuantBlock + 1) * 4), back(n * 4);
  TRAINSIM_CUDA(cudaMemcpy(d.get(), x.data(), n * 4, cudaMemcpyHostToDevice));
  int8_quantize(d.get<float>(), q.get<signed char>(), s.get<float>(), n, 0);
  int8_dequantize(q.get<signed char>(), s.get<float>(), back.get<float>(), n, 0);
  std::vector<float> y(n);
  TRAINSIM_CUDA(cudaMemcpy(y.data(), back.get(), n * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) { num += (x[i] - y[i]) * (x[i] - y[i]); den += x[i] * x[i]; }
  // Blockwise absmax scaling to 127 levels: relative error well under 1%.
  EXPECT_LT(std::sqrt(num / den), 0.01);
}

TEST(GpuKernels, TopKWithErrorFeedbackConservesTheGradient) {
  REQUIRE_GPU();
  const size_t n = 1 << 20;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.37 * i) * (i % 13);
  DeviceBuffer dg(n * 4), r(n * 4), vals(n * 4), idx(n * 4), sample((1 << 16) * 4), counter(4);
  TRAINSIM_CUDA(cudaMemcpy(dg.get(), g.data(), n * 4, cudaMemcpyHostToDevice));
  TRAINSIM_CUDA(cudaMemset(r.get(), 0, n * 4));
  const size_t kept = topk_error_feedback(dg.get<float>(), r.get<float>(), vals.get<float>(), idx.get<int>(), n, n, 0.01,
                                          sample.get<float>(), counter.get<int>(), 0);
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.01, 0.003);
  // Sent values plus the kept residual reproduce the gradient exactly.
  std::vector<float> res(n), v(kept);
  std::vector<int> ix(kept);
  TRAINSIM_CUDA(cudaMemcpy(res.data(), r.get(), n * 4, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(v.data(), vals.get(), kept * 4, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(ix.data(), idx.get(), kept * 4, cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < kept; ++k) res[ix[k]] += v[k];
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(res[i], g[i]) << i;
}
