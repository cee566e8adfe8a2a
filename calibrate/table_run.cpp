#include "table_run.h"

#include <set>

#include "input_error.h"
#include "json_fields.h"

namespace trainsim::calib {

using json = nlohmann::json;

void check_provenance(const json& prov, const std::string& where) {
  if (!prov.is_object()) throw InputError(where, "expected an object, found " + json_excerpt(prov));
  for (const char* k : {"source", "device", "driver", "cuda", "nccl", "date", "command"})
    if (prov.contains(k) && !prov[k].is_string()) throw InputError(where + "." + k, "expected a string, found " + json_excerpt(prov[k]));
  if (prov.contains("device_uuids")) {
    const json& u = prov["device_uuids"];
    if (!u.is_array()) throw InputError(where + ".device_uuids", "expected an array of strings, found " + json_excerpt(u));
    for (std::size_t i = 0; i < u.size(); ++i)
      if (!u[i].is_string())
        throw InputError(where + ".device_uuids[" + std::to_string(i) + "]", "expected a string, found " + json_excerpt(u[i]));
  }
}

json table_run_json(const char* key, json samples, const gpu::DeviceInfo& device, const std::string& command, const std::string& date) {
  json prov = {{"source", "measured"}, {"device", device.name}, {"device_count", 1}, {"driver", device.driver},
               {"cuda", device.cuda_runtime}, {"nccl", device.nccl}, {"date", date}, {"command", command}};
  if (!device.uuids.empty()) prov["device_uuids"] = json::array({device.uuids.front()});
  return {{key, std::move(samples)}, {"provenance", prov}};
}

const json& table_run_samples(const json& run, const char* key, const std::string& where, const std::string& what) {
  if (!run.is_object() || !run.contains(key) || !run[key].is_array() || run[key].empty())
    throw InputError(where, "is not " + what + ": no " + key + " samples");
  if (!run.contains("provenance") || !run["provenance"].is_object())
    throw InputError(where + ": provenance", "a run records where it was measured (source \"measured\")");
  check_provenance(run["provenance"], where + ": provenance");
  if (run["provenance"].value("source", "") != "measured")
    throw InputError(where + ": provenance", "a run records where it was measured (source \"measured\")");
  return run[key];
}

void check_runs_distinct(const std::vector<json>& runs, const std::vector<std::string>& run_paths) {
  for (std::size_t j = 1; j < runs.size(); ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (runs[i] == runs[j])
        throw InputError(run_paths[j], "is the same run as " + run_paths[i] + " (given twice, the medians would count it twice)");
}

void check_runs_match_profile(const json& profile, const std::string& profile_path, const std::vector<json>& runs,
                              const std::vector<std::string>& run_paths) {
  if (!profile.is_object() || !profile.contains("provenance") || !profile["provenance"].is_object())
    throw InputError(profile_path, "is not a profile measured by calibrate");
  check_provenance(profile["provenance"], profile_path + ": provenance");
  if (profile["provenance"].value("source", "") != "measured") throw InputError(profile_path, "is not a profile measured by calibrate");
  const std::string part = profile["provenance"].value("device", std::string());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string dev = runs[i]["provenance"].value("device", std::string());
    if (dev != part) throw InputError(run_paths.at(i), "was measured on \"" + dev + "\", the profile " + profile_path + " on \"" + part + "\"");
  }
}

json merged_table_provenance(const std::vector<json>& runs, const std::string& rule, const std::string& command, const std::string& date) {
  json prov = {{"source", "measured"}, {"date", date}, {"command", command}, {"rule", rule}};
  json merged = json::array();
  std::vector<std::string> uuids;
  std::set<std::string> seen;
  for (const json& r : runs) {
    const json& p = r.at("provenance");
    merged.push_back(p);
    for (const auto& u : p.value("device_uuids", std::vector<std::string>()))
      if (seen.insert(u).second) uuids.push_back(u);
  }
  const json& first = runs.at(0).at("provenance");
  for (const char* k : {"device", "driver", "cuda", "nccl"}) prov[k] = first.value(k, std::string());
  prov["device_count"] = 1;
  if (!uuids.empty()) prov["device_uuids"] = uuids;
  prov["merged_from"] = merged;
  return prov;
}

}  // namespace trainsim::calib
