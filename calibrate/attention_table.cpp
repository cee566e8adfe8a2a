#include "attention_table.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "input_error.h"
#include "profile_merge.h"

namespace trainsim::calib {

using json = nlohmann::json;

namespace {

using Key = std::tuple<int, int, int, int, int, bool>;
Key key_of(const gpu::AttentionSample& s) { return {s.batch, s.heads, s.seq, s.head_dim, s.kv_group, s.dropout}; }

}  // namespace

json attention_samples_json(const std::vector<gpu::AttentionSample>& samples) {
  json out = json::array();
  for (const auto& a : samples)
    out.push_back({{"batch", a.batch}, {"heads", a.heads}, {"seq", a.seq}, {"head_dim", a.head_dim}, {"kv_group", a.kv_group},
                   {"dropout", a.dropout}, {"fwd_us", a.fwd_us}, {"bwd_us", a.bwd_us}, {"fwd_tflops", a.fwd_tflops},
                   {"bwd_tflops", a.bwd_tflops}});
  return out;
}

json attention_json(const std::vector<gpu::AttentionSample>& samples, double peak_tflops) {
  std::vector<double> fwd, bwd;
  json rows = json::array();
  for (const auto& a : samples) {
    fwd.push_back(a.fwd_tflops / peak_tflops);
    bwd.push_back(a.bwd_tflops / peak_tflops);
    rows.push_back({a.batch * a.heads, a.seq, a.head_dim, a.kv_group, a.dropout ? 1 : 0, a.fwd_tflops / peak_tflops, a.bwd_tflops / peak_tflops});
  }
  // calibrate's own median: the upper middle of an even count, as make_profile has always taken it.
  auto upper_median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {{"forward_fraction_of_peak", upper_median(fwd)},
          {"backward_fraction_of_peak", upper_median(bwd)},
          {"table", {{"columns", {"batch_heads", "seq", "head_dim", "kv_group", "dropout", "forward_fraction", "backward_fraction"}},
                     {"rows", rows}}}};
}

json attention_run_json(const std::vector<gpu::AttentionSample>& samples, const gpu::DeviceInfo& device, const std::string& command,
                        const std::string& date) {
  json prov = {{"source", "measured"}, {"device", device.name}, {"device_count", 1}, {"driver", device.driver},
               {"cuda", device.cuda_runtime}, {"nccl", device.nccl}, {"date", date}, {"command", command}};
  if (!device.uuids.empty()) prov["device_uuids"] = json::array({device.uuids.front()});
  return {{"attention_run", attention_samples_json(samples)}, {"provenance", prov}};
}

std::vector<gpu::AttentionSample> attention_run_samples(const json& run, const std::string& where) {
  if (!run.is_object() || !run.contains("attention_run") || !run["attention_run"].is_array() || run["attention_run"].empty())
    throw InputError(where, "is not an attention run (calibrate attention-table --out): no attention_run samples");
  if (!run.contains("provenance") || !run["provenance"].is_object() || run["provenance"].value("source", "") != "measured")
    throw InputError(where + ": provenance", "an attention run records where it was measured (source \"measured\")");
  std::vector<gpu::AttentionSample> out;
  const json& rows = run["attention_run"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string at = where + ": attention_run[" + std::to_string(i) + "]";
    const json& a = rows[i];
    try {
      gpu::AttentionSample s{a.at("batch").get<int>(), a.at("heads").get<int>(), a.at("seq").get<int>(), a.at("head_dim").get<int>(),
                             a.at("fwd_us").get<double>(), a.at("bwd_us").get<double>(), a.at("fwd_tflops").get<double>(),
                             a.at("bwd_tflops").get<double>()};
      s.kv_group = a.at("kv_group").get<int>();
      s.dropout = a.at("dropout").get<bool>();
      if (s.batch < 1 || s.heads < 1 || s.seq < 1 || s.head_dim < 1 || s.kv_group < 1 || s.heads % s.kv_group != 0)
        throw InputError(at, "batch, heads, seq, head_dim and kv_group must be positive, heads a multiple of kv_group");
      if (!(s.fwd_us > 0) || !(s.bwd_us > 0) || !(s.fwd_tflops > 0) || !(s.bwd_tflops > 0))
        throw InputError(at, "times and rates must be positive numbers");
      out.push_back(s);
    } catch (const json::exception& e) {
      throw InputError(at, std::string("expected batch, heads, seq, head_dim, kv_group, dropout, fwd_us, bwd_us, fwd_tflops, "
                                       "bwd_tflops: ") + e.what());
    }
  }
  return out;
}

std::vector<gpu::AttentionSample> merge_attention_runs(const std::vector<std::vector<gpu::AttentionSample>>& runs) {
  std::map<Key, std::vector<const gpu::AttentionSample*>> by_shape;
  std::vector<Key> order;
  for (const auto& run : runs)
    for (const auto& s : run) {
      auto& list = by_shape[key_of(s)];
      if (list.empty()) order.push_back(key_of(s));
      list.push_back(&s);
    }
  std::vector<gpu::AttentionSample> out;
  for (const Key& k : order) {
    const auto& list = by_shape[k];
    std::vector<double> f, b;
    for (const auto* s : list) f.push_back(s->fwd_us), b.push_back(s->bwd_us);
    gpu::AttentionSample m = *list.front();
    const double flops = m.fwd_tflops * m.fwd_us * 1e6;  // the forward's FLOP count, as the bench counted it
    m.fwd_us = median_of_runs(f);
    m.bwd_us = median_of_runs(b);
    m.fwd_tflops = flops / (m.fwd_us * 1e6);
    m.bwd_tflops = 2 * flops / (m.bwd_us * 1e6);
    out.push_back(m);
  }
  return out;
}

void set_attention_table(json& profile, const std::vector<gpu::AttentionSample>& samples, const std::vector<json>& runs,
                         const std::string& rule, const std::string& command, const std::string& date) {
  if (samples.empty()) throw InputError("attention-table", "no attention samples to write");
  const json* peak = nullptr;
  if (profile.contains("gpu") && profile["gpu"].contains("peak_tflops") && profile["gpu"]["peak_tflops"].contains("bf16"))
    peak = &profile["gpu"]["peak_tflops"]["bf16"];
  if (!peak || !peak->is_number() || !(peak->get<double>() > 0))
    throw InputError("gpu.peak_tflops.bf16", "the profile needs its bf16 peak to write attention as fractions of it");
  json a = attention_json(samples, peak->get<double>());
  // Where the table was measured: every run's card, in the form of a merged profile's provenance.
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
  a["provenance"] = prov;
  profile["gpu"]["attention"] = a;
  if (profile.contains("measurements") && profile["measurements"].is_object())
    profile["measurements"]["attention"] = attention_samples_json(samples);
}

}  // namespace trainsim::calib
