#include "attention_table.h"

#include <algorithm>
#include <tuple>

#include "input_error.h"
#include "json_fields.h"
#include "profile_merge.h"
#include "table_run.h"

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
  return table_run_json("attention_run", attention_samples_json(samples), device, command, date);
}

gpu::AttentionSample read_attention_sample(const json& a, const std::string& at) {
  if (!a.is_object()) throw InputError(at, "expected an attention sample object, found " + json_excerpt(a));
  auto field = [&](const char* key) -> const json& {
    if (!a.contains(key)) throw InputError(at + "." + key, "required field is missing");
    return a[key];
  };
  auto whole = [&](const char* key) { return json_integer(field(key), at + "." + key, 1); };
  auto amount = [&](const char* key) { return json_positive(field(key), at + "." + key); };
  gpu::AttentionSample s{whole("batch"), whole("heads"), whole("seq"), whole("head_dim"),
                         amount("fwd_us"), amount("bwd_us"), amount("fwd_tflops"), amount("bwd_tflops")};
  s.kv_group = whole("kv_group");
  if (!field("dropout").is_boolean()) throw InputError(at + ".dropout", "expected true or false, found " + json_excerpt(a["dropout"]));
  s.dropout = a["dropout"].get<bool>();
  if (s.heads % s.kv_group != 0)
    throw InputError(at + ".kv_group", "heads (" + std::to_string(s.heads) + ") must be a multiple of kv_group (" + std::to_string(s.kv_group) + ")");
  return s;
}

std::vector<gpu::AttentionSample> attention_run_samples(const json& run, const std::string& where) {
  const json& rows = table_run_samples(run, "attention_run", where, "an attention run (calibrate attention-table --out)");
  std::vector<gpu::AttentionSample> out;
  for (std::size_t i = 0; i < rows.size(); ++i)
    out.push_back(read_attention_sample(rows[i], where + ": attention_run[" + std::to_string(i) + "]"));
  return out;
}

std::vector<gpu::AttentionSample> merge_attention_runs(const std::vector<std::vector<gpu::AttentionSample>>& runs) {
  return merge_runs(runs, key_of, [](const std::vector<const gpu::AttentionSample*>& list) {
    std::vector<double> f, b;
    for (const auto* s : list) f.push_back(s->fwd_us), b.push_back(s->bwd_us);
    gpu::AttentionSample m = *list.front();
    const double flops = m.fwd_tflops * m.fwd_us * 1e6;  // the forward's FLOP count, as the bench counted it
    m.fwd_us = median_of_runs(f);
    m.bwd_us = median_of_runs(b);
    m.fwd_tflops = flops / (m.fwd_us * 1e6);
    m.bwd_tflops = 2 * flops / (m.bwd_us * 1e6);
    return m;
  });
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
  const json prov = merged_table_provenance(runs, rule, command, date);
  a["provenance"] = prov;
  profile["gpu"]["attention"] = a;
  if (profile.contains("measurements") && profile["measurements"].is_object())
    profile["measurements"]["attention"] = attention_samples_json(samples);
}

}  // namespace trainsim::calib
