#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "layout.h"
#include "step_builder.h"

namespace trainsim {

// A recorded step's critical path in sum: its slices (one a task, two for a task drawn in two
// parts, a recompute and its backward), its time (the step's), the part of it that is
// contention (time beyond each task's time alone), and its time on each pipeline stage, most first.
struct CriticalPath {
  std::size_t slices = 0;
  double seconds = 0, contention_s = 0;
  std::vector<std::pair<int, double>> by_stage;  // (stage, seconds)
};
CriticalPath summarize_critical_path(const sim::StepResult& r, const Layout& l);

// Where a recorded step's critical path runs: its slice count, the stages holding most of it, and
// how much of it is contention ("925 slices, runs on stage 7 90.4%, ...; contention 290.5 ms of it
// (1.4%)"); empty without one.
std::string critical_path_summary(const sim::StepResult& r, const Layout& l);

}  // namespace trainsim
