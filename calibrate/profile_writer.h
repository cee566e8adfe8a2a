#pragma once
// Turns what calibration measured into a hardware profile (the schema models/hardware_profile.h
// reads). Parts not measured on this machine (links absent with one GPU, the network) are kept
// from a base profile with their own provenance.
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "link_table.h"
#include "measurements.h"

namespace trainsim::calib {

struct HealthIssue {
  std::string what;  // "memory bandwidth 3.1 TB/s is 28% under the expected 4.3 TB/s"
};

nlohmann::json make_profile(const gpu::Measurements& m, const nlohmann::json& base, const std::string& name,
                            const std::string& command, const std::string& date);
// Link tables from measured collectives, one per (collective, group size).
std::vector<LinkTable> tables_from_measurements(const gpu::Measurements& m);
// Fitted collective entries for a profile's intra_node.collectives, with provenance.
nlohmann::json collective_fits_json(const std::vector<LinkTable>& tables, const nlohmann::json& provenance);
// Any measured rate more than `tolerance` under what the base profile expects, and any wrong
// collective result.
std::vector<HealthIssue> health_check(const gpu::Measurements& m, const nlohmann::json& base, double tolerance);

}  // namespace trainsim::calib
