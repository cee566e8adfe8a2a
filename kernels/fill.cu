#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "timing.h"

namespace trainsim::gpu {

__device__ __forceinline__ float hash_uniform(size_t i, unsigned seed) {
  unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<unsigned long long>(seed) << 32);
  x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 33;
  return static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
}

template <class T, class Conv>
__global__ void fill_kernel(T* p, size_t n, unsigned seed, float scale, Conv conv) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float v = hash_uniform(i, seed) * scale;
    if (v == 0.0f) v = scale * 1e-3f;
    p[i] = conv(v);
  }
}

struct ToBf16 { __device__ __nv_bfloat16 operator()(float v) const { return __float2bfloat16(v); } };
struct ToF16 { __device__ __half operator()(float v) const { return __float2half(v); } };
struct ToF32 { __device__ float operator()(float v) const { return v; } };
struct ToFp8 { __device__ __nv_fp8_e4m3 operator()(float v) const { return __nv_fp8_e4m3(v); } };

void fill_random_bf16(void* p, size_t n, unsigned seed, float scale, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale, ToBf16{});
  TRAINSIM_KERNEL_CHECK();
}
void fill_random_f16(void* p, size_t n, unsigned seed, float scale, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__half*>(p), n, seed, scale, ToF16{});
  TRAINSIM_KERNEL_CHECK();
}
void fill_random_f32(float* p, size_t n, unsigned seed, float scale, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(p, n, seed, scale, ToF32{});
  TRAINSIM_KERNEL_CHECK();
}
void fill_random_fp8(void* p, size_t n, unsigned seed, float scale, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed, scale, ToFp8{});
  TRAINSIM_KERNEL_CHECK();
}

}  // namespace trainsim::gpu
