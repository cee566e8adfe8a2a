#pragma once
// A device allocation that did not fit: what was asked for and what the device had, so that a
// caller can report a layout that ran out of memory instead of stopping. Plain C++ (no CUDA
// headers), for the planner's code that catches it.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace trainsim::gpu {

class DeviceOutOfMemory : public std::runtime_error {
 public:
  DeviceOutOfMemory(double requested, double free, double total)
      : std::runtime_error(describe(requested, free, total)), requested_bytes(requested), free_bytes(free), total_bytes(total) {}
  double requested_bytes, free_bytes, total_bytes;

 private:
  static std::string describe(double requested, double free, double total) {
    char text[160];
    std::snprintf(text, sizeof text, "out of device memory: asked for %.3f GiB with %.3f GiB free of %.3f GiB", requested / (1 << 30),
                  free / (1 << 30), total / (1 << 30));
    return text;
  }
};

// Another rank of the same step could not set up (RunnerConfig::agree_setup): out of device memory,
// or another error that rank reports itself. This rank's buffers fit, and it stopped with the others.
class PeerSetupFailed : public std::runtime_error {
 public:
  PeerSetupFailed() : std::runtime_error("another rank of the step could not set up") {}
};

}  // namespace trainsim::gpu
