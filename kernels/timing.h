#pragma once
#include <algorithm>
#include <vector>

#include "cuda_compat.h"

namespace trainsim::gpu {

// Times `fn` (which enqueues work on `stream`) with CUDA events: `warmup` untimed runs, then the
// median of `reps` timed runs, in microseconds, each preceded by `before()` outside the timing.
// Each timed run enqueues `fn` `inner` times back to back and reports the mean.
template <class Fn, class Before>
double time_median_after_us(cudaStream_t stream, int warmup, int reps, Fn&& fn, Before&& before, int inner = 1) {
  for (int i = 0; i < warmup; ++i) fn();
  TRAINSIM_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  TRAINSIM_CUDA(cudaEventCreate(&a));
  TRAINSIM_CUDA(cudaEventCreate(&b));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    before();
    TRAINSIM_CUDA(cudaEventRecord(a, stream));
    for (int k = 0; k < inner; ++k) fn();
    TRAINSIM_CUDA(cudaEventRecord(b, stream));
    TRAINSIM_CUDA(cudaEventSynchronize(b));
    TRAINSIM_CUDA(cudaEventElapsedTime(&ms[i], a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[reps / 2] / inner;
}

// As above with nothing before each run. With `inner` > 1 short kernels are timed as they run in
// a stream (launches overlapping execution) rather than with the events' own overhead.
template <class Fn>
double time_median_us(cudaStream_t stream, int warmup, int reps, Fn&& fn, int inner = 1) {
  return time_median_after_us(stream, warmup, reps, fn, [] {}, inner);
}

// Fills with uniform values in [-scale, scale) from a counter-based hash (never zeros).
void fill_random_bf16(void* p, size_t n, unsigned seed, float scale, cudaStream_t s);
void fill_random_f32(float* p, size_t n, unsigned seed, float scale, cudaStream_t s);
void fill_random_f16(void* p, size_t n, unsigned seed, float scale, cudaStream_t s);
void fill_random_fp8(void* p, size_t n, unsigned seed, float scale, cudaStream_t s);

}  // namespace trainsim::gpu
