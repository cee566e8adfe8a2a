#pragma once
// A profile's attention table measured on its own (calibrate attention-table): each card's run of
// calibrate's attention shapes, then the runs' per-shape medians written into a profile's
// gpu.attention with their own provenance, replacing the table of the profile's full calibration
// runs. For a table whose runs used an older protocol, without measuring everything else again.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "measurements.h"

namespace trainsim::calib {

// One card's run: its samples and where and how they were measured.
nlohmann::json attention_run_json(const std::vector<gpu::AttentionSample>& samples, const gpu::DeviceInfo& device,
                                  const std::string& command, const std::string& date);
// The samples of a run written by attention_run_json; throws InputError naming `where` and the
// field when it is not one.
std::vector<gpu::AttentionSample> attention_run_samples(const nlohmann::json& run, const std::string& where);
// One attention sample as attention_samples_json writes it (every field present, sizes whole
// numbers from 1, heads a multiple of kv_group, positive times and rates); throws InputError naming
// `at` and the field.
gpu::AttentionSample read_attention_sample(const nlohmann::json& a, const std::string& at);
// Per shape (batch, heads, seq, head size, grouping, dropout), forward and backward each the median
// of the runs that measured it (median_of_runs, as calibrate merge takes it), its rates recomputed
// from the median times; shapes in the first run's order, then any the first lacks.
std::vector<gpu::AttentionSample> merge_attention_runs(const std::vector<std::vector<gpu::AttentionSample>>& runs);
// The profile's gpu.attention (fractions of its bf16 peak, as calibrate writes them) and its raw
// measurements.attention from the samples; gpu.attention.provenance lists every run's card.
// Throws InputError if the profile has no bf16 peak or no samples are given.
void set_attention_table(nlohmann::json& profile, const std::vector<gpu::AttentionSample>& samples,
                         const std::vector<nlohmann::json>& runs, const std::string& rule, const std::string& command,
                         const std::string& date);
// gpu.attention of a profile from samples: the median fractions of peak and the table's rows.
nlohmann::json attention_json(const std::vector<gpu::AttentionSample>& samples, double peak_tflops);
// The raw record of the samples (measurements.attention).
nlohmann::json attention_samples_json(const std::vector<gpu::AttentionSample>& samples);

}  // namespace trainsim::calib
