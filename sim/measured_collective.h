#pragma once
// Collectives measured on the machine, for one kind and group size inside a node: piecewise
// alpha-beta segments by message size, t(S) = alpha + S * factor / busbw on each segment (NCCL
// switches protocol and channel count with the size, so one line does not hold from 1 MiB to GiB).
// A plan for such a collective is rescaled so that on idle links it takes the measured time; under
// contention its flows still share links with everything else.
#include <vector>

#include "collective.h"

namespace trainsim::sim {

struct MeasuredSegment {
  double min_bytes = 0, max_bytes = 0;  // the measured sizes this segment was fitted over
  double alpha_s = 0;
  double busbw_Bps = 0;
};

struct MeasuredCollective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int gpus = 0;
  std::vector<MeasuredSegment> segments;  // by size, ascending; the first also covers smaller sizes
                                          // and the last larger ones
};

// The local alpha-beta model at `bytes` (per call, nccl-tests' size): the segment that covers it;
// between two segments, the straight line from the end of one to the start of the next (measured
// times are interpolated, not extrapolated from one side); below the first or above the last
// segment, that segment's line (above a last segment of one point, that point's rate).
struct LocalModel {
  double alpha_s = 0;
  double per_byte_s = 0;  // time per byte of the buffer (the bus factor included)
};
LocalModel local_model(const MeasuredCollective& m, double bytes);
double measured_time_s(const MeasuredCollective& m, double bytes);

struct PlanScale {
  double latency = 1.0;  // multiplies every phase latency
  double bytes = 1.0;    // multiplies every flow's bytes
};

// The factors that make a plan whose idle-network time is idle_latency_s + bytes * idle_per_byte_s
// take the measured time at `bytes`.
PlanScale measured_scale(const MeasuredCollective& m, double bytes, double idle_latency_s, double idle_per_byte_s);

// The measurement for `kind` over `gpus` ranks, or nullptr.
const MeasuredCollective* find_measured(const std::vector<MeasuredCollective>& all, CollectiveKind kind, int gpus);

}  // namespace trainsim::sim
