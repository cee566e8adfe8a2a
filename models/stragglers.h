#pragma once
// Stragglers: GPUs that sustain less than the profile's speed. A synchronous step waits for its
// slowest participant: a tensor-parallel group for its slowest member at every layer, a pipeline
// for its slowest stage, data-parallel replicas for the slowest replica at the gradient reduction.
// So at scale the tail of the per-GPU speed distribution, not its mean, sets the pace.
//
// Each GPU's speed is a fraction of the profile's (which is calibrated on one GPU, the nominal
// part): drawn from a normal distribution of mean 1 and the given standard deviation, then the
// named GPUs set to their given speeds. The draw of GPU g depends only on the seed and g (a
// counter-based generator), so a GPU keeps its speed as the cluster grows and sizes compare like
// with like. A straggler's compute-stream work (forward, backward, recompute, optimizer) takes
// 1/speed as long; its communication kernels and links are not slowed. A slow NIC carries
// everything that crosses it at its own rate.
#include <cstdint>
#include <vector>

namespace trainsim {

struct StragglerSpec {
  bool given = false;
  struct SlowGpu {
    int gpu = 0;       // global index: node * gpus_per_node + local index
    double speed = 1;  // fraction of the profile's speed, in (0, 1]
  };
  std::vector<SlowGpu> gpus;
  // A NIC that runs below its rate (a link trained down, a flapping port): all traffic through it,
  // both ways, at `speed` times the network's NIC rate.
  struct SlowNic {
    int node = 0;
    int nic = 0;       // index within the node
    double speed = 1;  // in (0, 1]
  };
  std::vector<SlowNic> nics;
  double speed_stdev = 0;  // standard deviation of a GPU's sustained speed (fraction of nominal)
  std::uint64_t seed = 1;
};

// The speed of each of `gpus` GPUs (all 1 where the spec is not given).
std::vector<double> gpu_speeds(const StragglerSpec& spec, int gpus);
// The rate of each NIC of `nodes` nodes with `nics_per_node` NICs each, as a fraction of the
// nominal rate (NIC n of node k at k * nics_per_node + n); empty when no NIC is slow there.
std::vector<double> nic_speeds(const StragglerSpec& spec, int nodes, int nics_per_node);

// One standard normal draw for (seed, index), by Box-Muller on two splitmix64 outputs.
double standard_normal(std::uint64_t seed, std::uint64_t index);

}  // namespace trainsim
