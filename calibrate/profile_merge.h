#pragma once
// Several calibration runs of one kind of part merged into one profile. Each measured sample (a
// GEMM shape, a step kernel at a size, an attention shape, a copy size) takes the median of its
// time over the runs that measured it, and the profile is fitted from those medians as from one
// run. The spread between runs and between units of the same part (a few percent on the H200:
// GEMM rates moved 2-9% between two runs half an hour apart) then averages out instead of landing
// in the profile whole.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "measurements.h"

namespace trainsim::calib {

// The median a merge takes of one sample's times over the runs: the middle one, or the mean of
// the two middle ones.
double median_of_runs(std::vector<double> times);

// The single-GPU measurements a profile records (its raw `measurements` and its GEMM table).
// Multi-GPU collectives and peer copies are left out: they are kept from the base profile. A
// missing or malformed record, or none measured at all, is an InputError naming its path.
gpu::Measurements single_gpu_measurements(const nlohmann::json& profile);

// The runs' per-sample medians, fitted onto the last profile (whose unmeasured parts, multi-GPU
// record and network stay); provenance lists every run. Throws InputError (the record's path) on
// a profile without the expected records.
nlohmann::json merge_profiles(const std::vector<nlohmann::json>& runs, const std::string& name, const std::string& command,
                              const std::string& date);

}  // namespace trainsim::calib
