#pragma once
// A profile's step-kernel table measured on its own (calibrate kernel-table): each card's run of
// calibrate's element-wise and row-wise kernels at its shapes, then the runs' per-shape medians
// written into a profile's gpu.memory_kernels with their own provenance, replacing the table of
// the profile's full calibration runs. For a table measured at more shapes than those runs were,
// without measuring everything else again.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "measurements.h"

namespace trainsim::calib {

// How a run's kernels were timed (gpu::StepKernelTiming) by the name calibrate kernel-table
// --timing takes and a run's provenance records: burst, single, evicted, after-compute,
// under-load. Throws InputError naming `where` for any other name.
gpu::StepKernelTiming parse_kernel_timing(const std::string& name, const std::string& where);
std::string kernel_timing_name(gpu::StepKernelTiming timing);
// The shapes' names (gpu::StepKernelShapes) as --shapes takes them: profile, dense.
gpu::StepKernelShapes parse_kernel_shapes(const std::string& name, const std::string& where);

// One card's run: its samples and where and how they were measured; the provenance's `method`
// says how the kernels were timed ({"timing": ..., "shapes": ...}).
nlohmann::json kernel_run_json(const std::vector<gpu::KernelSample>& samples, const gpu::DeviceInfo& device,
                               const std::string& command, const std::string& date);
nlohmann::json kernel_run_json(const std::vector<gpu::KernelSample>& samples, const gpu::DeviceInfo& device,
                               const std::string& command, const std::string& date, gpu::StepKernelTiming timing,
                               gpu::StepKernelShapes shapes);
// The rule a table merged from these runs is written with: how they were timed. A run without a
// method was timed in bursts (the first kernel-table runs). Runs timed differently are not one
// table: throws InputError naming the first run that differs from the first run.
std::string kernel_table_rule(const std::vector<nlohmann::json>& runs, const std::vector<std::string>& run_paths);
// One kernel sample as kernel_samples_json writes it (every field present, sizes whole numbers, a
// layer kernel's shape a valid one-layer model's, a positive time); throws InputError naming `at`
// and the field.
gpu::KernelSample read_kernel_sample(const nlohmann::json& k, const std::string& at);
// The samples of a run written by kernel_run_json; throws InputError naming `where` and the field
// when it is not one.
std::vector<gpu::KernelSample> kernel_run_samples(const nlohmann::json& run, const std::string& where);
// Per kernel and shape (tokens, hidden, ffn, vocab, heads, K/V heads, family), the median of the
// runs' times (median_of_runs, as calibrate merge takes them); in the first run's order, then any
// the first lacks.
std::vector<gpu::KernelSample> merge_kernel_runs(const std::vector<std::vector<gpu::KernelSample>>& runs);
// The profile's gpu.memory_kernels from the samples, with provenance listing every run's card, and
// its raw measurements.step_kernels. Throws InputError if no samples are given.
void set_kernel_table(nlohmann::json& profile, const std::vector<gpu::KernelSample>& samples, const std::vector<nlohmann::json>& runs,
                      const std::string& rule, const std::string& command, const std::string& date);
// gpu.memory_kernels from samples: per kernel, rows of [bytes, GB/s, hidden], the bytes the
// workload model counts for the op at the sample's shape over its measured time (so that the cost
// model divides the same bytes by it).
nlohmann::json memory_kernels_json(const std::vector<gpu::KernelSample>& samples);
// The raw record of the samples (measurements.step_kernels).
nlohmann::json kernel_samples_json(const std::vector<gpu::KernelSample>& samples);

}  // namespace trainsim::calib
