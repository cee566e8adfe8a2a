#include "memory_bench.h"

#include <cuda_bf16.h>

#include <cstring>

#include "runner_kernels.h"
#include "timing.h"

namespace trainsim::gpu {

namespace {

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

__global__ void add_kernel(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void empty_kernel() {}

int grid_for(size_t n) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const size_t blocks = (n + 255) / 256;
  return static_cast<int>(std::min<size_t>(blocks, static_cast<size_t>(sms) * 8));
}

std::vector<double> sizes(bool quick) {
  std::vector<double> s;
  for (double b = 1 << 20; b <= (quick ? 1.0 : 4.0) * (1ull << 30); b *= 4) s.push_back(b);
  return s;
}

}  // namespace

std::vector<BandwidthSample> bench_memory_kernels(bool quick) {
  std::vector<BandwidthSample> out;
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  const double max_bytes = sizes(quick).back();
  DeviceBuffer a(static_cast<size_t>(max_bytes)), b(static_cast<size_t>(max_bytes)), c(static_cast<size_t>(max_bytes));
  fill_random_f32(a.get<float>(), a.bytes() / 4, 1, 1.0f, st);
  fill_random_f32(b.get<float>(), b.bytes() / 4, 2, 1.0f, st);
  for (double bytes : sizes(quick)) {
    const size_t n4 = static_cast<size_t>(bytes) / 16;
    const int reps = bytes < 64e6 ? 50 : 10;
    double us = time_median_us(st, 3, reps, [&] {
      copy_kernel<<<grid_for(n4), 256, 0, st>>>(a.get<float4>(), c.get<float4>(), n4);
    });
    TRAINSIM_KERNEL_CHECK();
    out.push_back({"copy", 2 * bytes, us, 2 * bytes / (us * 1e3), -1, -1});
    us = time_median_us(st, 3, reps, [&] { TRAINSIM_CUDA(cudaMemcpyAsync(c.get(), a.get(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, st)); });
    out.push_back({"memcpy_d2d", 2 * bytes, us, 2 * bytes / (us * 1e3), -1, -1});
    us = time_median_us(st, 3, reps, [&] {
      add_kernel<<<grid_for(n4), 256, 0, st>>>(a.get<float4>(), b.get<float4>(), c.get<float4>(), n4);
    });
    TRAINSIM_KERNEL_CHECK();
    out.push_back({"add", 3 * bytes, us, 3 * bytes / (us * 1e3), -1, -1});
  }
  // Adam over parameter counts whose state spans the same sizes.
  for (double bytes : sizes(quick)) {
    const size_t n = static_cast<size_t>(bytes) / 16;  // four fp32 arrays of n make `bytes`
    if (n * 4 * 4 + n * 2 > 3 * static_cast<size_t>(max_bytes)) break;
    float* w = a.get<float>();
    float* m = w + n;
    float* v = m + n;
    float* g = v + n;
    __nv_bfloat16* w16 = b.get<__nv_bfloat16>();
    const double moved = 30.0 * n;
    const double us = time_median_us(st, 3, bytes < 64e6 ? 50 : 10, [&] {
      adam_update(w, m, v, g, w16, n, 1e-4f, st);
    });
    out.push_back({"adam", moved, us, moved / (us * 1e3), -1, -1});
  }
  TRAINSIM_CUDA(cudaStreamSynchronize(st));
  cudaStreamDestroy(st);
  return out;
}

std::vector<BandwidthSample> bench_host_copies(bool quick) {
  std::vector<BandwidthSample> out;
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  const size_t max_bytes = quick ? (256ull << 20) : (1ull << 30);
  void* host = nullptr;
  TRAINSIM_CUDA(cudaMallocHost(&host, max_bytes));
  std::memset(host, 1, max_bytes);
  DeviceBuffer dev(max_bytes);
  for (size_t bytes = 1 << 20; bytes <= max_bytes; bytes *= 4) {
    double us = time_median_us(st, 2, 10, [&] { TRAINSIM_CUDA(cudaMemcpyAsync(dev.get(), host, bytes, cudaMemcpyHostToDevice, st)); });
    out.push_back({"h2d", static_cast<double>(bytes), us, bytes / (us * 1e3), -1, -1});
    us = time_median_us(st, 2, 10, [&] { TRAINSIM_CUDA(cudaMemcpyAsync(host, dev.get(), bytes, cudaMemcpyDeviceToHost, st)); });
    out.push_back({"d2h", static_cast<double>(bytes), us, bytes / (us * 1e3), -1, -1});
  }
  cudaFreeHost(host);
  cudaStreamDestroy(st);
  return out;
}

std::vector<BandwidthSample> bench_peer_copies(int devices) {
  std::vector<BandwidthSample> out;
  const size_t bytes = 512ull << 20;
  for (int s = 0; s < devices; ++s)
    for (int d = 0; d < devices; ++d) {
      if (s == d) continue;
      int can = 0;
      TRAINSIM_CUDA(cudaDeviceCanAccessPeer(&can, s, d));
      TRAINSIM_CUDA(cudaSetDevice(s));
      if (can) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(d, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) TRAINSIM_CUDA(e);
        cudaGetLastError();
      }
      DeviceBuffer src(bytes);
      TRAINSIM_CUDA(cudaSetDevice(d));
      DeviceBuffer dst(bytes);
      TRAINSIM_CUDA(cudaSetDevice(s));
      cudaStream_t st;
      TRAINSIM_CUDA(cudaStreamCreate(&st));
      const double us = time_median_us(st, 2, 10, [&] { TRAINSIM_CUDA(cudaMemcpyPeerAsync(dst.get(), d, src.get(), s, bytes, st)); });
      out.push_back({can ? "p2p" : "p2p_staged", static_cast<double>(bytes), us, bytes / (us * 1e3), s, d});
      cudaStreamDestroy(st);
    }
  TRAINSIM_CUDA(cudaSetDevice(0));
  return out;
}

double bench_launch_overhead_us() {
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  const int launches = 2000;
  const double us = time_median_us(st, 1, 5, [&] {
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32, 0, st>>>();
  });
  TRAINSIM_KERNEL_CHECK();
  cudaStreamDestroy(st);
  return us / launches;
}

}  // namespace trainsim::gpu
