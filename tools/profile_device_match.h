#pragma once
// Whether the GPU at hand is the part a hardware profile describes, for `planner validate`, whose
// predictions are the profile's: a profile measured on another part predicts another part, and a
// profile with more memory than the card picks layouts that may not fit on it.
#include <string>
#include <vector>

#include "hardware_profile.h"

namespace trainsim {

// One line per mismatch (none where the card is the profile's part): the device's name as CUDA
// gives it and its memory as CUDA reports it (0: unknown).
std::vector<std::string> profile_device_mismatches(const HardwareProfile& hp, const std::string& device_name, double device_memory_bytes);

}  // namespace trainsim
