#pragma once
// A lower bound on a symmetric-mode step, from the compute alone: what a search may use to skip
// simulating a layout that cannot rank among the ones it keeps.
#include "step_builder.h"

namespace trainsim::sim {

// No step of `in` (symmetric mode, every GPU at the profile's speed) takes less than this. Each
// stage's compute queue runs every pass of every micro-batch one after another, at full speed at
// best, so a stage is busy for at least m times the forward, recompute and backward compute of
// its chunks. Nothing runs on stage s before the first micro-batch's forward of chunk 0 has
// crossed the stages before it, and the stage's last pass (the backward of chunk 0) must then
// still cross them backwards; hence, for every stage s,
//   step >= sum over s' < s of (F + R + B of chunk 0 on s') + m * sum over chunks c of (F + R + B)(s, c).
// Communication, transfers, the optimizer and the rest of the bubble only add to it.
double step_lower_bound(const StepInput& in);

}  // namespace trainsim::sim
