#include "compression.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <cub/device/device_radix_sort.cuh>

#include "cuda_compat.h"

namespace trainsim::gpu {

namespace {

__global__ void quantize_kernel(const float* __restrict__ x, signed char* __restrict__ q, float* __restrict__ scales, size_t n) {
  // One block of 256 threads per quantisation block.
  __shared__ float red[kQuantBlock / 32];
  const size_t i = blockIdx.x * static_cast<size_t>(kQuantBlock) + threadIdx.x;
  const float v = i < n ? x[i] : 0.0f;
  float a = fabsf(v);
  for (int o = 16; o > 0; o /= 2) a = fmaxf(a, __shfl_xor_sync(0xffffffff, a, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = a;
  __syncthreads();
  if (threadIdx.x < 32) {
    float b = threadIdx.x < kQuantBlock / 32 ? red[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o /= 2) b = fmaxf(b, __shfl_xor_sync(0xffffffff, b, o));
    if (threadIdx.x == 0) red[0] = b;
  }
  __syncthreads();
  const float scale = red[0] > 0 ? red[0] / 127.0f : 1.0f;
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  if (i < n) q[i] = static_cast<signed char>(__float2int_rn(v / scale));
}

__global__ void dequantize_kernel(const signed char* __restrict__ q, const float* __restrict__ scales, float* __restrict__ x, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(kQuantBlock) + threadIdx.x;
  if (i < n) x[i] = q[i] * scales[blockIdx.x];
}

__global__ void dequantize_add_kernel(const signed char* __restrict__ q, const float* __restrict__ scales, float* __restrict__ x,
                                      size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(kQuantBlock) + threadIdx.x;
  if (i < n) x[i] += q[i] * scales[blockIdx.x];
}

__global__ void scatter_add_kernel(const float* __restrict__ vals, const int* __restrict__ idx, size_t m, float* __restrict__ dst) {
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < m; k += static_cast<size_t>(gridDim.x) * blockDim.x)
    if (idx[k] >= 0) dst[idx[k]] += vals[k];
}

__global__ void sample_kernel(const float* __restrict__ g, const float* __restrict__ r, float* __restrict__ out, size_t n,
                              size_t stride, size_t count) {
  const size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (j < count) {
    const size_t i = j * stride;
    out[j] = i < n ? fabsf(g[i] + r[i]) : 0.0f;
  }
}

// Keeps |g + r| >= threshold (the threshold in device memory when `threshold_dev` is set, else
// `threshold`) up to `capacity`; the rest goes to the residual.
__global__ void select_kernel(const float* __restrict__ g, float* __restrict__ r, float* __restrict__ values,
                              int* __restrict__ indices, size_t capacity, size_t n, float threshold,
                              const float* threshold_dev, int* counter) {
  const float t = threshold_dev ? *threshold_dev : threshold;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float a = g[i] + r[i];
    if (fabsf(a) >= t) {
      const int slot = atomicAdd(counter, 1);
      if (static_cast<size_t>(slot) < capacity) {
        values[slot] = a;
        indices[slot] = static_cast<int>(i);
        r[i] = 0.0f;
        continue;
      }
    }
    r[i] = a;
  }
}

}  // namespace

void int8_quantize(const float* x, signed char* q, float* scales, size_t n, cudaStream_t st) {
  const size_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
  quantize_kernel<<<static_cast<unsigned>(blocks), kQuantBlock, 0, st>>>(x, q, scales, n);
  TRAINSIM_KERNEL_CHECK();
}

void int8_dequantize(const signed char* q, const float* scales, float* x, size_t n, cudaStream_t st) {
  const size_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
  dequantize_kernel<<<static_cast<unsigned>(blocks), kQuantBlock, 0, st>>>(q, scales, x, n);
  TRAINSIM_KERNEL_CHECK();
}

void int8_dequantize_add(const signed char* q, const float* scales, float* x, size_t n, cudaStream_t st) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>((n + kQuantBlock - 1) / kQuantBlock);
  dequantize_add_kernel<<<blocks, kQuantBlock, 0, st>>>(q, scales, x, n);
  TRAINSIM_KERNEL_CHECK();
}

void scatter_add(const float* vals, const int* idx, size_t m, float* dst, cudaStream_t st) {
  if (m == 0) return;
  scatter_add_kernel<<<static_cast<unsigned>(std::min<size_t>(4096, (m + 255) / 256)), 256, 0, st>>>(vals, idx, m, dst);
  TRAINSIM_KERNEL_CHECK();
}

size_t topk_error_feedback(const float* grad, float* residual, float* values, int* indices, size_t capacity, size_t n,
                           double fraction, float* sample_scratch, int* counter, cudaStream_t st) {
  const size_t samples = std::min<size_t>(n, 1 << 16);
  const size_t stride = std::max<size_t>(1, n / samples);
  sample_kernel<<<static_cast<unsigned>((samples + 255) / 256), 256, 0, st>>>(grad, residual, sample_scratch, n, stride, samples);
  TRAINSIM_KERNEL_CHECK();
  std::vector<float> host(samples);
  TRAINSIM_CUDA(cudaMemcpyAsync(host.data(), sample_scratch, samples * sizeof(float), cudaMemcpyDeviceToHost, st));
  TRAINSIM_CUDA(cudaStreamSynchronize(st));
  const size_t kth = std::min(samples - 1, static_cast<size_t>(std::floor((1.0 - fraction) * samples)));
  std::nth_element(host.begin(), host.begin() + kth, host.end());
  const float threshold = host[kth];
  TRAINSIM_CUDA(cudaMemsetAsync(counter, 0, sizeof(int), st));
  select_kernel<<<1024, 256, 0, st>>>(grad, residual, values, indices, capacity, n, threshold, nullptr, counter);
  TRAINSIM_KERNEL_CHECK();
  int count = 0;
  TRAINSIM_CUDA(cudaMemcpyAsync(&count, counter, sizeof(int), cudaMemcpyDeviceToHost, st));
  TRAINSIM_CUDA(cudaStreamSynchronize(st));
  return std::min<size_t>(static_cast<size_t>(count), capacity);
}

namespace {
constexpr size_t kSamples = 1 << 16;
size_t radix_temp_bytes() {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
                                 static_cast<int>(kSamples));
  return bytes;
}
}  // namespace

size_t topk_device_scratch_bytes() { return 2 * kSamples * sizeof(float) + radix_temp_bytes(); }

void topk_error_feedback_async(const float* grad, float* residual, float* values, int* indices, size_t capacity, size_t n,
                               double fraction, void* scratch, int* counter, cudaStream_t st) {
  // Evenly strided sample of |grad + residual|, sorted on the device; the (1 - fraction) quantile
  // of the sample is the threshold.
  const size_t samples = std::min(n, kSamples);
  const size_t stride = std::max<size_t>(1, n / samples);
  float* sample = static_cast<float*>(scratch);
  float* sorted = sample + kSamples;
  void* temp = sorted + kSamples;
  size_t temp_bytes = radix_temp_bytes();
  sample_kernel<<<static_cast<unsigned>((samples + 255) / 256), 256, 0, st>>>(grad, residual, sample, n, stride, samples);
  TRAINSIM_KERNEL_CHECK();
  TRAINSIM_CUDA(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, sample, sorted, static_cast<int>(samples), 0, 32, st));
  const size_t kth = std::min(samples - 1, static_cast<size_t>(std::floor((1.0 - fraction) * samples)));
  TRAINSIM_CUDA(cudaMemsetAsync(counter, 0, sizeof(int), st));
  select_kernel<<<1024, 256, 0, st>>>(grad, residual, values, indices, capacity, n, 0.0f, sorted + kth, counter);
  TRAINSIM_KERNEL_CHECK();
}

}  // namespace trainsim::gpu
