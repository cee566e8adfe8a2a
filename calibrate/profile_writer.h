#pragma once
// Turns what calibration measured into a hardware profile (the schema models/hardware_profile.h
// reads). Parts not measured on this machine (links absent with one GPU, the network) are kept
// from a base profile with their own provenance.
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "gpu_links.h"
#include "link_table.h"
#include "measurements.h"

namespace trainsim::calib {

struct HealthIssue {
  std::string what;  // "memory bandwidth 3.1 TB/s is 28% under the expected 4.3 TB/s"
};

// A base that derives its GPU tables from a calibrated profile (`derive_from`, the datasheet file of a
// part not measured before) lacks what that profile measured with two or more GPUs: the GEMM/NCCL
// interference and the NCCL communicators' memory. A one-GPU run cannot measure them either, so the
// base takes them from `origin` (the profile named by derive_from), each marked derived from it;
// whatever the run does measure replaces them in make_profile. Other bases are returned unchanged.
nlohmann::json carry_unmeasured(const nlohmann::json& base, const nlohmann::json& origin);
// `links`: the link type of each GPU pair (from nvidia-smi), written beside the peer-copy rates.
nlohmann::json make_profile(const gpu::Measurements& m, const nlohmann::json& base, const std::string& name,
                            const std::string& command, const std::string& date, const GpuLinks& links = {});
// Link tables from measured collectives, one per (collective, group size).
std::vector<LinkTable> tables_from_measurements(const std::vector<gpu::CollectiveSample>& samples);
// Fitted collective entries for a profile's intra_node.collectives, with provenance.
nlohmann::json collective_fits_json(const std::vector<LinkTable>& tables, const nlohmann::json& provenance);
// intra_node.collectives (single and piecewise fits), busbw_GBps and latency_us from measured tables.
void set_intra_collectives(nlohmann::json& intra_node, const std::vector<LinkTable>& tables, const nlohmann::json& provenance);
// Refits a profile's intra_node collectives from the raw measurements it records (after a change
// to the fitting); returns the number of tables refitted, 0 when the profile records none.
int refit_collectives(nlohmann::json& profile);
// Any measured rate more than `tolerance` under what the base profile expects, and any wrong
// collective result.
std::vector<HealthIssue> health_check(const gpu::Measurements& m, const nlohmann::json& base, double tolerance);

}  // namespace trainsim::calib
