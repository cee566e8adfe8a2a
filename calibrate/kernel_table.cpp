#include "kernel_table.h"

#include <tuple>

#include "input_error.h"
#include "json_fields.h"
#include "memory_kernels.h"
#include "layer_ops.h"
#include "profile_merge.h"
#include "table_run.h"

namespace trainsim::calib {

using json = nlohmann::json;

namespace {

using Key = std::tuple<std::string, int, int, int, int, int, int, bool>;
Key key_of(const gpu::KernelSample& s) { return {s.kernel, s.tokens, s.hidden, s.ffn, s.vocab, s.heads, s.kv_heads, s.llama}; }

}  // namespace

json kernel_samples_json(const std::vector<gpu::KernelSample>& samples) {
  json out = json::array();
  for (const auto& k : samples)
    out.push_back({{"kernel", k.kernel}, {"tokens", k.tokens}, {"hidden", k.hidden}, {"ffn", k.ffn}, {"vocab", k.vocab},
                   {"heads", k.heads}, {"seq", k.seq}, {"kv_heads", k.kv_heads}, {"llama", k.llama}, {"time_us", k.time_us}});
  return out;
}

namespace {

// The one-layer model whose ops a layer kernel's sample was timed at.
ModelConfig sample_model(const gpu::KernelSample& k) {
  ModelConfig cfg;
  cfg.family = k.llama ? Family::llama : Family::gpt;
  cfg.layers = 1; cfg.hidden = k.hidden; cfg.heads = k.heads; cfg.kv_heads = k.kv_heads > 0 ? k.kv_heads : k.heads; cfg.ffn_hidden = k.ffn;
  cfg.vocab = k.vocab; cfg.seq_len = k.seq;
  return cfg;
}

}  // namespace

gpu::KernelSample read_kernel_sample(const json& k, const std::string& at) {
  if (!k.is_object()) throw InputError(at, "expected a kernel sample object, found " + json_excerpt(k));
  gpu::KernelSample s;
  try {
    s.kernel = k.at("kernel").get<std::string>();
    s.llama = k.at("llama").get<bool>();
  } catch (const json::exception& e) {
    throw InputError(at, "expected kernel, tokens, hidden, ffn, vocab, heads, seq, kv_heads, llama, time_us: " + json_error_text(e));
  }
  auto integer = [&](const char* key) {
    if (!k.contains(key)) throw InputError(at + "." + key, "required field is missing");
    return json_integer(k[key], at + "." + key, 0);
  };
  s.tokens = integer("tokens"), s.hidden = integer("hidden"), s.ffn = integer("ffn"), s.vocab = integer("vocab");
  s.heads = integer("heads"), s.seq = integer("seq"), s.kv_heads = integer("kv_heads");
  if (!k.contains("time_us")) throw InputError(at + ".time_us", "required field is missing");
  s.time_us = json_positive(k["time_us"], at + ".time_us");
  if (!is_memory_kernel(s.kernel)) throw InputError(at, "no step prices a kernel named \"" + s.kernel + "\"");
  if (s.tokens < 1) throw InputError(at + ".tokens", "must be positive (for adam: the parameters updated, in Mi)");
  if (s.kernel != "adam") {
    // A layer's kernel: its shape is a model's (whole heads, whole K/V groups) and whole sequences.
    validate_model(sample_model(s), at);
    if (s.tokens % s.seq != 0) throw InputError(at + ".tokens", "must be a whole number of sequences of seq tokens");
  }
  return s;
}

json memory_kernels_json(const std::vector<gpu::KernelSample>& samples) {
  json mk = json::object();
  for (const auto& k : samples) {
    if (k.kernel == "adam") {
      const double params = static_cast<double>(k.tokens) * (1 << 20);  // the tokens field holds parameters in Mi
      mk["adam"].push_back({34.0 * params, 34.0 * params / (k.time_us * 1e3), 0});  // CostModel::adam_time_s's bytes
      continue;
    }
    const ModelConfig cfg = sample_model(k);
    const OpContext ctx{cfg, 1, false, Recompute::none, k.tokens / k.seq, Precision::bf16};
    double bytes = 0;
    for (const LayerOps& ops : {transformer_layer_ops(ctx), embedding_ops(ctx), head_ops(ctx)})
      for (const auto* list : {&ops.forward, &ops.backward})
        for (const Op& op : *list)
          if (op.kind == OpKind::memory && op.kernel == k.kernel) bytes = op.bytes;
    if (bytes > 0) mk[k.kernel].push_back({bytes, bytes / (k.time_us * 1e3), k.hidden});
  }
  return mk;
}

namespace {

struct TimingName {
  gpu::StepKernelTiming timing;
  const char* name;
  const char* rule;  // how each kernel and shape was timed
};
constexpr TimingName kTimings[] = {
    {gpu::StepKernelTiming::burst, "burst", "ten calls back to back"},
    {gpu::StepKernelTiming::single, "single", "one call between events"},
    {gpu::StepKernelTiming::evicted, "evicted", "one call between events after a write over twice the L2 cache"},
    {gpu::StepKernelTiming::after_compute, "after-compute", "one call between events after dependent FMAs on every SM"},
    {gpu::StepKernelTiming::under_load, "under-load", "one call between events right after four 8192^3 bf16 GEMMs"},
};

std::string timing_names() {
  std::string out;
  for (const auto& t : kTimings) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

}  // namespace

gpu::StepKernelTiming parse_kernel_timing(const std::string& name, const std::string& where) {
  for (const auto& t : kTimings)
    if (name == t.name) return t.timing;
  throw InputError(where, "\"" + name + "\" is not a kernel timing (" + timing_names() + ")");
}

std::string kernel_timing_name(gpu::StepKernelTiming timing) {
  for (const auto& t : kTimings)
    if (t.timing == timing) return t.name;
  return "burst";
}

gpu::StepKernelShapes parse_kernel_shapes(const std::string& name, const std::string& where) {
  if (name == "profile") return gpu::StepKernelShapes::profile;
  if (name == "dense") return gpu::StepKernelShapes::dense;
  throw InputError(where, "\"" + name + "\" is not a set of kernel shapes (profile, dense)");
}

json kernel_run_json(const std::vector<gpu::KernelSample>& samples, const gpu::DeviceInfo& device, const std::string& command,
                     const std::string& date) {
  return table_run_json("kernel_run", kernel_samples_json(samples), device, command, date);
}

json kernel_run_json(const std::vector<gpu::KernelSample>& samples, const gpu::DeviceInfo& device, const std::string& command,
                     const std::string& date, gpu::StepKernelTiming timing, gpu::StepKernelShapes shapes) {
  json run = kernel_run_json(samples, device, command, date);
  const char* shape_names[] = {"quick", "profile", "dense"};  // gpu::StepKernelShapes in order
  run["provenance"]["method"] = {{"timing", kernel_timing_name(timing)}, {"shapes", shape_names[static_cast<int>(shapes)]}};
  return run;
}

std::string kernel_table_rule(const std::vector<json>& runs, const std::vector<std::string>& run_paths) {
  auto timing_of = [&](std::size_t i) {
    const json& prov = runs.at(i).at("provenance");
    if (!prov.contains("method")) return gpu::StepKernelTiming::burst;
    const json& m = prov["method"];
    if (!m.is_object() || !m.contains("timing") || !m["timing"].is_string())
      throw InputError(run_paths.at(i) + ": provenance.method", "expected {\"timing\": name, ...}");
    return parse_kernel_timing(m["timing"].get<std::string>(), run_paths.at(i) + ": provenance.method.timing");
  };
  const gpu::StepKernelTiming first = timing_of(0);
  for (std::size_t i = 1; i < runs.size(); ++i)
    if (timing_of(i) != first)
      throw InputError(run_paths.at(i), "was timed \"" + kernel_timing_name(timing_of(i)) + "\", " + run_paths.at(0) + " \"" +
                                            kernel_timing_name(first) + "\": runs timed differently are not one table");
  std::string how;
  for (const auto& t : kTimings)
    if (t.timing == first) how = t.rule;
  return "each kernel and shape timed " + how + " (calibrate kernel-table --out --timing " + kernel_timing_name(first) +
         "), per-shape medians over these runs; replaces the table of the profile's full calibration runs";
}

std::vector<gpu::KernelSample> kernel_run_samples(const json& run, const std::string& where) {
  const json& rows = table_run_samples(run, "kernel_run", where, "a kernel run (calibrate kernel-table --out)");
  std::vector<gpu::KernelSample> out;
  for (std::size_t i = 0; i < rows.size(); ++i) out.push_back(read_kernel_sample(rows[i], where + ": kernel_run[" + std::to_string(i) + "]"));
  return out;
}

std::vector<gpu::KernelSample> merge_kernel_runs(const std::vector<std::vector<gpu::KernelSample>>& runs) {
  return merge_runs(runs, key_of, [](const std::vector<const gpu::KernelSample*>& list) {
    std::vector<double> t;
    for (const auto* s : list) t.push_back(s->time_us);
    gpu::KernelSample m = *list.front();
    m.time_us = median_of_runs(t);
    return m;
  });
}

void set_kernel_table(json& profile, const std::vector<gpu::KernelSample>& samples, const std::vector<json>& runs, const std::string& rule,
                      const std::string& command, const std::string& date) {
  if (samples.empty()) throw InputError("kernel-table", "no kernel samples to write");
  json mk = memory_kernels_json(samples);
  if (mk.empty()) throw InputError("kernel-table", "none of the runs' kernels is one the workload model prices");
  mk["provenance"] = merged_table_provenance(runs, rule, command, date);
  profile["gpu"]["memory_kernels"] = mk;
  if (profile.contains("measurements") && profile["measurements"].is_object())
    profile["measurements"]["step_kernels"] = kernel_samples_json(samples);
}

}  // namespace trainsim::calib
