#include "kernel_table.h"

#include <tuple>

#include "input_error.h"
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

json memory_kernels_json(const std::vector<gpu::KernelSample>& samples) {
  json mk = json::object();
  for (const auto& k : samples) {
    if (k.kernel == "adam") {
      const double params = static_cast<double>(k.tokens) * (1 << 20);  // the tokens field holds parameters in Mi
      mk["adam"].push_back({34.0 * params, 34.0 * params / (k.time_us * 1e3), 0});  // CostModel::adam_time_s's bytes
      continue;
    }
    ModelConfig cfg;
    cfg.family = k.llama ? Family::llama : Family::gpt;
    cfg.layers = 1; cfg.hidden = k.hidden; cfg.heads = k.heads; cfg.kv_heads = k.kv_heads > 0 ? k.kv_heads : k.heads; cfg.ffn_hidden = k.ffn;
    cfg.vocab = k.vocab; cfg.seq_len = k.seq;
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

json kernel_run_json(const std::vector<gpu::KernelSample>& samples, const gpu::DeviceInfo& device, const std::string& command,
                     const std::string& date) {
  return table_run_json("kernel_run", kernel_samples_json(samples), device, command, date);
}

std::vector<gpu::KernelSample> kernel_run_samples(const json& run, const std::string& where) {
  const json& rows = table_run_samples(run, "kernel_run", where, "a kernel run (calibrate kernel-table --out)");
  std::vector<gpu::KernelSample> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string at = where + ": kernel_run[" + std::to_string(i) + "]";
    const json& k = rows[i];
    try {
      gpu::KernelSample s;
      s.kernel = k.at("kernel").get<std::string>();
      s.tokens = k.at("tokens").get<int>(), s.hidden = k.at("hidden").get<int>(), s.ffn = k.at("ffn").get<int>();
      s.vocab = k.at("vocab").get<int>(), s.heads = k.at("heads").get<int>(), s.seq = k.at("seq").get<int>();
      s.kv_heads = k.at("kv_heads").get<int>();
      s.llama = k.at("llama").get<bool>();
      s.time_us = k.at("time_us").get<double>();
      if (s.kernel.empty()) throw InputError(at, "kernel must name a kernel");
      if (s.tokens < 1 || s.hidden < 0 || s.ffn < 0 || s.vocab < 0 || s.heads < 0 || s.seq < 0 || s.kv_heads < 0)
        throw InputError(at, "tokens must be positive and the other sizes not negative");
      if (s.kernel != "adam" && (s.hidden < 1 || s.seq < 1 || s.tokens % s.seq != 0))
        throw InputError(at, "a layer's kernel needs a positive hidden size and a whole number of sequences of tokens");
      if (!(s.time_us > 0)) throw InputError(at, "time_us must be a positive number");
      out.push_back(s);
    } catch (const json::exception& e) {
      throw InputError(at, std::string("expected kernel, tokens, hidden, ffn, vocab, heads, seq, kv_heads, llama, time_us: ") + e.what());
    }
  }
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
