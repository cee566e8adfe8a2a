#pragma once
// GEMMs timed inside a real training step (`planner validate` with TRAINSIM_TIME_KERNEL_CLASSES=1)
// beside the cost model's time for each, summed by how long each GEMM runs: calibrate times a
// GEMM alone, and how far that is from the step depends on the GEMM's length (the long ones run at
// a higher duty in calibrate than between a step's memory-bound kernels).
#include <string>
#include <vector>

namespace trainsim {

struct InStepGemm {
  double measured_s = 0;   // one call, in the step
  double predicted_s = 0;  // one call, by the cost model
  double calls_per_step = 0;
};

// The GEMMs whose time in the step lies in [lo_s, hi_s), summed over a step.
struct GemmLengthBin {
  double lo_s = 0, hi_s = 0;
  int gemms = 0;
  double measured_s = 0, predicted_s = 0;
};

// Bins under 0.1 ms, 0.1-0.3 ms, 0.3-1 ms and from 1 ms; empty bins are kept.
std::vector<GemmLengthBin> gemms_by_length(const std::vector<InStepGemm>& gemms);
// "under 0.1 ms -4.8% (14), 0.1-0.3 ms -1.5% (26), ..." (model against step, summed; empty bins left out).
std::string describe(const std::vector<GemmLengthBin>& bins);

}  // namespace trainsim
