#pragma once
// A table of a profile measured apart from the profile's full calibration runs (calibrate
// attention-table, calibrate kernel-table): each card's run is a file of samples with the
// provenance of where and how they were timed; the runs' per-sample medians replace the profile's
// table, which then carries its own provenance listing every run.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "measurements.h"

namespace trainsim::calib {

// Throws InputError naming `where` unless `prov` is an object whose fields calibrate reads (source,
// device, driver, cuda, nccl, date, command; device_uuids) hold what it reads them as.
void check_provenance(const nlohmann::json& prov, const std::string& where);
// A run file: `samples` under `key` beside the provenance of this card (one GPU, its UUID).
nlohmann::json table_run_json(const char* key, nlohmann::json samples, const gpu::DeviceInfo& device, const std::string& command,
                              const std::string& date);
// The samples array of a run file written by table_run_json under `key`; throws InputError
// naming `where` when the file is not such a run (`what` names the run's kind and its command).
const nlohmann::json& table_run_samples(const nlohmann::json& run, const char* key, const std::string& where, const std::string& what);
// Throws InputError unless `profile` was measured by calibrate and every run on the same part
// (a run of another part would carry that part's rates into the profile).
void check_runs_match_profile(const nlohmann::json& profile, const std::string& profile_path, const std::vector<nlohmann::json>& runs,
                              const std::vector<std::string>& run_paths);
// Throws InputError naming the later file if two runs are the same (one file given twice, or a
// copy): the per-sample medians would count that run twice and the provenance list it twice.
void check_runs_distinct(const std::vector<nlohmann::json>& runs, const std::vector<std::string>& run_paths);
// The provenance of a table merged from runs: the first run's device, driver, CUDA and NCCL,
// every run's card, the rule and command that wrote it, and each run's provenance in merged_from.
nlohmann::json merged_table_provenance(const std::vector<nlohmann::json>& runs, const std::string& rule, const std::string& command,
                                       const std::string& date);

// The runs' samples grouped by what was measured (`key_of`), each group made one sample by
// `merged(samples)`; in the order the keys first appear, the first run's first.
template <class Sample, class KeyOf, class Merged>
std::vector<Sample> merge_runs(const std::vector<std::vector<Sample>>& runs, KeyOf key_of, Merged merged) {
  using Key = decltype(key_of(std::declval<const Sample&>()));
  std::map<Key, std::vector<const Sample*>> by_key;
  std::vector<Key> order;
  for (const auto& run : runs)
    for (const Sample& s : run) {
      auto& list = by_key[key_of(s)];
      if (list.empty()) order.push_back(key_of(s));
      list.push_back(&s);
    }
  std::vector<Sample> out;
  for (const Key& k : order) out.push_back(merged(by_key.at(k)));
  return out;
}

}  // namespace trainsim::calib
