#include "profile_device_match.h"

#include <cstdio>

namespace trainsim {

std::vector<std::string> profile_device_mismatches(const HardwareProfile& hp, const std::string& device_name, double device_memory_bytes) {
  std::vector<std::string> out;
  const Provenance& p = hp.provenance;
  if (p.source == "measured" && !p.device.empty() && !device_name.empty() && p.device != device_name)
    out.push_back("the profile " + hp.name + " was measured on " + p.device + " and this GPU is " + device_name +
                  ": the predictions are that part's, not this one's");
  // A thousandth (some 80 MiB on an 80 GB part) is let pass: the memory model errs by about that.
  if (device_memory_bytes > 0 && device_memory_bytes < hp.memory_bytes * (1 - 1e-3)) {
    char line[240];
    std::snprintf(line, sizeof line,
                  "this GPU has %.2f GiB and the profile %s %.2f GiB: layouts that fit the profile's memory may not fit here "
                  "(a run that does not is recorded as out of memory)",
                  device_memory_bytes / (1 << 30), hp.name.c_str(), hp.memory_bytes / (1 << 30));
    out.push_back(line);
  }
  return out;
}

}  // namespace trainsim
