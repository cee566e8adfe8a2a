#include "power_model.h"

#include <algorithm>

namespace trainsim {

namespace {

// Linear between the pairs, held at the first and the last.
double at_rate(const std::vector<std::pair<double, double>>& t, double rate) {
  if (rate <= t.front().first) return t.front().second;
  for (std::size_t i = 1; i < t.size(); ++i)
    if (rate <= t[i].first) {
      const auto& [r0, w0] = t[i - 1];
      const auto& [r1, w1] = t[i];
      return w0 + (w1 - w0) * (rate - r0) / (r1 - r0);
    }
  return t.back().second;
}

}  // namespace

double memory_bound_power_w(const HardwareProfile& hw, Family family) {
  const auto& m = hw.clock_power;
  return family == Family::gpt && m.memory_bound_w_gpt > 0 ? m.memory_bound_w_gpt : m.memory_bound_w;
}

double mix_power_w(const HardwareProfile& hw, const KernelMix& mix, Family family) {
  if (!hw.has_clock_power_model()) return 0;
  const double total = mix.gemm_s + mix.attention_s + mix.memory_bound_s;
  if (!(total > 0)) return 0;
  const auto& m = hw.clock_power;
  double joules = mix.memory_bound_s * memory_bound_power_w(hw, family);
  if (mix.gemm_s > 0) joules += mix.gemm_s * at_rate(m.gemm_w, mix.gemm_flops / mix.gemm_s / 1e12);
  if (mix.attention_s > 0) joules += mix.attention_s * at_rate(m.attention_w, mix.attention_flops / mix.attention_s / 1e12);
  return joules / total;
}

double held_clock_mhz(const HardwareProfile& hw, const KernelMix& mix, Family family) {
  // Under the limit nothing holds the clock down.
  const double w = mix_power_w(hw, mix, family);
  if (!(w > hw.clock_power.limit_w)) return hw.max_sm_mhz;
  return std::min(hw.max_sm_mhz, hw.clock_power.line_mhz + hw.clock_power.line_mhz_per_w * w);
}

}  // namespace trainsim
