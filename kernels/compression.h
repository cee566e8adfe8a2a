#pragma once
// Gradient compression kernels: blockwise INT8 quantisation (absmax scale per 256 values) and Top-K
// selection with error feedback (the unsent remainder is kept and added to the next gradient).
#include <cuda_runtime.h>

#include <cstddef>

namespace trainsim::gpu {

constexpr int kQuantBlock = 256;

void int8_quantize(const float* x, signed char* q, float* scales, size_t n, cudaStream_t st);
void int8_dequantize(const signed char* q, const float* scales, float* x, size_t n, cudaStream_t st);
// x += dequantize(q): n a multiple of kQuantBlock.
void int8_dequantize_add(const signed char* q, const float* scales, float* x, size_t n, cudaStream_t st);

// dst[idx[k]] += vals[k] for the k < m with idx[k] >= 0 (indices unique within one call).
void scatter_add(const float* vals, const int* idx, size_t m, float* dst, cudaStream_t st);

// Top-K with error feedback over n values: acc = grad + residual; values with |acc| >= threshold
// are written to (values, indices) up to `capacity`, the rest stay in `residual`. The threshold is
// the (1 - fraction) quantile of |acc| estimated from an evenly strided sample. Returns the count.
size_t topk_error_feedback(const float* grad, float* residual, float* values, int* indices, size_t capacity, size_t n,
                           double fraction, float* sample_scratch, int* counter, cudaStream_t st);

// The same selection without a host round trip (the threshold is found on the device, so the
// stream never waits for the host): values and indices beyond what is kept are left as they were.
// `scratch` holds topk_device_scratch_bytes().
size_t topk_device_scratch_bytes();
void topk_error_feedback_async(const float* grad, float* residual, float* values, int* indices, size_t capacity, size_t n,
                               double fraction, void* scratch, int* counter, cudaStream_t st);

}  // namespace trainsim::gpu
