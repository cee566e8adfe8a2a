#pragma once
// The SM clock, power draw and power-limiter state of one GPU, sampled in a background thread
// while work runs, so that a timed run says what clock it held (a step at the power cap runs its
// kernels slower than calibrate's short bursts did). Through NVML, loaded at run time: where the
// driver's libnvidia-ml cannot be loaded there are no samples, and the monitor says why.
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace trainsim::gpu {

struct ClockReading {
  double wall_s = 0;   // seconds since the epoch (wall_clock_s)
  double sm_mhz = 0;
  double power_w = 0;  // the driver's power reading (on recent GPUs an average over the last second)
  // The power drawn at the moment of reading (NVML's instantaneous field), which a short run's
  // readings need: the average above lags the run's start by up to a second. NaN where the driver
  // does not report it.
  double power_instant_w = std::numeric_limits<double>::quiet_NaN();
  bool power_capped = false;  // the software power cap was holding the clock down
};

// Seconds since the epoch, the clock the readings are stamped with.
double wall_clock_s();

class ClockMonitor {
 public:
  // The GPU that CUDA numbers `cuda_device`, sampled every `interval_s` once started.
  explicit ClockMonitor(int cuda_device, double interval_s = 0.02);
  ~ClockMonitor();
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;

  bool available() const;
  const std::string& unavailable_reason() const;
  double power_limit_w() const;  // the enforced power limit; 0 where NVML does not say
  std::string uuid() const;      // as NVML names the GPU ("GPU-..."); empty where unavailable
  bool reports_power_cap() const;  // whether the driver says why clocks are held down (else power_capped is false)
  bool reports_instant_power() const;  // whether power_instant_w is read (else it is NaN)

  void start();
  // Stops sampling and returns the readings since start(), oldest first.
  std::vector<ClockReading> stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainsim::gpu
