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

// Top-K with error feedback over n values: acc = grad + residual; values with |acc| >= threshold
// are written to (values, indices) up to `capacity`, the rest stay in `residual`. The threshold is
// the (1 - fraction) quantile of |acc| estimated from an evenly strided sample. Returns the count.
size_t topk_error_feedback(const float* grad, float* residual, float* values, int* indices, size_t capacity, size_t n,
                           double fraction, float* sample_scratch, int* counter, cudaStream_t st);

}  // namespace trainsim::gpu
