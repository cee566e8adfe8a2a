#pragma once
#include <vector>

#include "measurements.h"

namespace trainsim::gpu {

// Device-memory kernels (copy, add, the fused Adam update) over working sets from 1 MiB to a few
// GiB; the bandwidth counts bytes read plus bytes written.
std::vector<BandwidthSample> bench_memory_kernels(bool quick);
// Pinned host <-> device copies (PCIe or C2C).
std::vector<BandwidthSample> bench_host_copies(bool quick);
// Peer copies between every ordered GPU pair.
std::vector<BandwidthSample> bench_peer_copies(int devices);
// Per-launch cost of an empty kernel, launched back to back.
double bench_launch_overhead_us();

}  // namespace trainsim::gpu
