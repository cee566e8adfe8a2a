#include "stragglers.h"

#include <cmath>

namespace trainsim {

namespace {

// splitmix64 (Steele, Lea and Flood 2014): a bijective mix of a 64-bit counter.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform draw in (0, 1] from 53 random bits.
double unit_interval(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

double standard_normal(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t key = splitmix64(seed);
  const double u1 = unit_interval(splitmix64(key ^ (2 * index)));
  const double u2 = unit_interval(splitmix64(key ^ (2 * index + 1)));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::vector<double> gpu_speeds(const StragglerSpec& spec, int gpus) {
  std::vector<double> speed(static_cast<std::size_t>(gpus), 1.0);
  if (!spec.given) return speed;
  if (spec.speed_stdev > 0)
    for (int g = 0; g < gpus; ++g) speed[g] = 1.0 + spec.speed_stdev * standard_normal(spec.seed, static_cast<std::uint64_t>(g));
  for (const auto& s : spec.gpus)
    if (s.gpu < gpus) speed[s.gpu] = s.speed;
  return speed;
}

std::vector<double> nic_speeds(const StragglerSpec& spec, int nodes, int nics_per_node) {
  std::vector<double> speed;
  for (const auto& n : spec.nics) {
    if (n.node >= nodes || n.nic >= nics_per_node) continue;
    if (speed.empty()) speed.assign(static_cast<std::size_t>(nodes) * nics_per_node, 1.0);
    speed[static_cast<std::size_t>(n.node) * nics_per_node + n.nic] = n.speed;
  }
  return speed;
}

}  // namespace trainsim
