#include "measured_collective.h"

#include <algorithm>
#include <stdexcept>

namespace trainsim::sim {

LocalModel local_model(const MeasuredCollective& m, double bytes) {
  if (m.segments.empty()) throw std::invalid_argument("measured collective without segments");
  const double factor = busbw_factor(m.kind, m.gpus);
  auto line = [&](const MeasuredSegment& s) { return LocalModel{s.alpha_s, factor / s.busbw_Bps}; };
  auto at = [](const LocalModel& l, double b) { return l.alpha_s + b * l.per_byte_s; };
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const MeasuredSegment& s = m.segments[i];
    if (bytes <= s.max_bytes) {
      if (i == 0 || bytes >= s.min_bytes) return line(s);
      // In the gap after segment i-1: interpolate between its last point and this one's first.
      const MeasuredSegment& p = m.segments[i - 1];
      const double t0 = at(line(p), p.max_bytes), t1 = at(line(s), s.min_bytes);
      const double slope = s.min_bytes > p.max_bytes ? (t1 - t0) / (s.min_bytes - p.max_bytes) : 0.0;
      const double t = t0 + (bytes - p.max_bytes) * slope;
      // As alpha + S * per_byte with a non-negative alpha and the same time at `bytes`.
      const double alpha = std::max(0.0, t0 - p.max_bytes * slope);
      return LocalModel{alpha, bytes > 0 ? (t - alpha) / bytes : 0.0};
    }
  }
  // Above the largest size measured: that segment's line, or, for a lone point, its rate.
  const MeasuredSegment& last = m.segments.back();
  if (last.min_bytes == last.max_bytes && last.max_bytes > 0) return LocalModel{0.0, at(line(last), last.max_bytes) / last.max_bytes};
  return line(last);
}

double measured_time_s(const MeasuredCollective& m, double bytes) {
  const LocalModel l = local_model(m, bytes);
  return l.alpha_s + bytes * l.per_byte_s;
}

PlanScale measured_scale(const MeasuredCollective& m, double bytes, double idle_latency_s, double idle_per_byte_s) {
  const LocalModel l = local_model(m, bytes);
  PlanScale k;
  if (idle_latency_s > 0) k.latency = l.alpha_s / idle_latency_s;
  if (idle_per_byte_s > 0) k.bytes = l.per_byte_s / idle_per_byte_s;
  return k;
}

const MeasuredCollective* find_measured(const std::vector<MeasuredCollective>& all, CollectiveKind kind, int gpus) {
  for (const MeasuredCollective& m : all)
    if (m.kind == kind && m.gpus == gpus) return &m;
  return nullptr;
}

}  // namespace trainsim::sim
