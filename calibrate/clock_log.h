#pragma once
// nvidia-smi's clock and power log, as written by
//   nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100
// (optionally with power.draw.instant, clocks_event_reasons.sw_power_cap and other columns, which
// its header names), read back to say what clock and power a stretch of GPU work ran at.
#include <limits>
#include <string>
#include <vector>

namespace trainsim::calib {

struct ClockSample {
  double wall_s = 0;  // seconds since the epoch (the log's local time, as this host reads it)
  double sm_mhz = 0;
  double power_w = 0;  // NaN where the log says [N/A]; on recent GPUs a mean over the last second
  double power_instant_w = std::numeric_limits<double>::quiet_NaN();  // the power at the moment; NaN: not logged
  double power_capped = std::numeric_limits<double>::quiet_NaN();  // 1: the power cap held the clock, 0: not, NaN: not logged
};

// Columns are read by the header's names (clocks.sm or clocks.current.sm, power.draw, and where
// present power.draw.instant and clocks_event_reasons.sw_power_cap; others are skipped), or without
// a header as timestamp, clock, power. Throws InputError naming the file and line of anything that
// is not a header or a sample. A last line without its newline (the log still being written) is
// left out.
std::vector<ClockSample> read_clock_log(const std::string& path);

struct ClockStats {
  int samples = 0;
  double sm_mhz = 0, power_w = 0;  // medians of the samples in the window (NaN: none)
  double capped_fraction = 0;       // of the samples that say, those at the power cap (NaN: none says)
  // The mean of the instantaneous readings (NaN: none logged): a mean, not a median, since a step
  // alternates kernels that draw 500 W and 1,000 W faster than the samples come, and its energy
  // over the window is what a power estimate is compared with.
  double power_instant_w = 0;
};
// The samples taken in [begin_s, end_s].
ClockStats clock_stats(const std::vector<ClockSample>& log, double begin_s, double end_s);

}  // namespace trainsim::calib
