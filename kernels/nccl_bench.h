#pragma once
#include <vector>

#include "measurements.h"

namespace trainsim::gpu {

// NCCL collectives in one process over the first `gpus` devices (ncclCommInitAll), from 8 B to
// `max_bytes`, each size checked against the expected sums (the `wrong` count).
std::vector<CollectiveSample> bench_collectives(int gpus, double max_bytes, bool quick);
// Fractional slowdown of a large bf16 GEMM on GPU 0 while an all-reduce loop runs on all GPUs.
double bench_interference(int gpus);

}  // namespace trainsim::gpu
