#include "result_json.h"

#include <nlohmann/json.hpp>

#include "text_report.h"

namespace trainsim {

using nlohmann::json;

namespace {
json breakdown_json(const Evaluation& ev) {
  json b = json::object();
  for (int c = 0; c < sim::kCategories; ++c) b[sim::category_name(c)] = ev.step.breakdown_s[c];
  return b;
}
}  // namespace

json cluster_to_json(const Scenario& s) {
  const NetworkSpec& n = s.cluster.network;
  json net{{"nics_per_node", n.nics_per_node}, {"nic_Gbps", n.nic_Gbps}, {"fabric", n.fabric}, {"oversubscription", n.oversubscription}};
  if (n.fabric != "single-switch") {
    net["nics_per_leaf"] = n.nics_per_leaf;
    net["nodes_per_leaf"] = network_for(s, s.cluster.nodes.front()).shape.nodes_per_leaf();
  }
  net["allreduce_algorithm"] = n.allreduce_algorithm;
  net["nvls"] = n.nvls;
  net["description"] = describe_network(s);
  return json{{"hardware", s.hardware.name},
              {"hardware_profile", s.hardware.provenance.source},
              {"gpus_per_node", s.cluster.gpus_per_node},
              {"network", net}};
}

json layout_to_json(const Layout& l) {
  return json{{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"vpp", l.vpp}, {"micro_batch", l.micro_batch},
              {"sequence_parallel", l.sequence_parallel}, {"recompute", to_string(l.recompute)}, {"zero", l.zero},
              {"bucket_MB", l.bucket_MB}, {"compression", to_string(l.compression)}, {"schedule", to_string(l.schedule)}};
}

json result_to_json(const Scenario& s, const Evaluation& ev) {
  json r;
  r["layout"] = layout_to_json(ev.layout);
  r["nodes"] = ev.nodes;
  r["gpus"] = ev.gpus;
  r["simulated"] = ev.simulated;
  if (ev.simulated) {
    r["step_time_s"] = ev.step.step_time_s;
    r["tokens_per_s"] = ev.tokens_per_s;
    r["mfu"] = ev.mfu;
    r["breakdown_s"] = breakdown_json(ev);
    r["comm_bytes_per_gpu"] = {{"tp", ev.step.tp_bytes_per_gpu}, {"dp", ev.step.dp_bytes_per_gpu}};
    if (ev.scaling_efficiency_vs_1gpu > 0) r["scaling_efficiency"] = ev.scaling_efficiency_vs_1gpu;
    if (ev.step.full_because) r["every_gpu_simulated_because"] = ev.step.full_because;
    if (ev.step.every_replica_because) r["every_replica_simulated_because"] = ev.step.every_replica_because;
    if (s.data.given)
      r["data"] = {{"loading_nodes", ev.input.loading_nodes}, {"loader_s_per_step", ev.input.loader_s},
                   {"storage_s_per_step", ev.input.storage_s}, {"input_s_per_step", ev.input.per_step_s}};
    if (s.reliability.given) {
      const ReliabilityResult& rr = ev.reliability;
      r["reliability"] = {{"job_mtbf_s", rr.job_mtbf_s},       {"checkpoint_bytes", rr.checkpoint_bytes},
                          {"checkpoint", s.reliability.async_checkpoint ? "async" : "sync"},
                          {"checkpoint_write_s", rr.checkpoint_write_s}, {"checkpoint_blocking_s", rr.checkpoint_blocking_s},
                          {"restart_s", rr.restart_s}, {"rework_s", rr.rework_s},
                          {"checkpoint_interval_steps", rr.interval_steps}, {"checkpoint_interval_s", rr.interval_s},
                          {"goodput", rr.goodput}};
    }
    if (ev.stragglers.given) {
      const auto& st = ev.stragglers;
      r["stragglers"] = {{"slowest_gpu", st.slowest_gpu}, {"slowest_speed", st.slowest_speed}, {"gpus_below_95pct", st.below_95},
                           {"named_gpus_in_cluster", st.named_here}};
      if (!s.stragglers.nics.empty()) {
        r["stragglers"]["slow_nics_in_cluster"] = st.slow_nics_here;
        r["stragglers"]["slowest_nic_speed"] = st.slowest_nic_speed;
      }
      if (st.step_without_s > 0) r["stragglers"]["step_time_at_nominal_speed_s"] = st.step_without_s;
      if (st.replicas_simulated > 0) {
        r["stragglers"]["slowest_replica"] = st.slowest_replica;
        r["stragglers"]["replicas_simulated"] = st.replicas_simulated;
      }
      if (st.step_upper_s > 0) r["stragglers"]["step_time_upper_bound_s"] = st.step_upper_s;
    }
    if (s.training.tokens_total > 0) {
      r["time_to_train_s"] = ev.time_to_train_s;
      r["gpu_hours"] = ev.time_to_train_s / 3600.0 * ev.gpus;
      if (s.cost.gpu_hour_usd > 0) r["cost_usd"] = ev.cost_usd;
      if (ev.facility_kW > 0) r["energy_kWh"] = ev.energy_kWh;
      if (s.cost.energy_usd_per_kWh > 0) r["energy_usd"] = ev.energy_usd;
    }
    if (ev.facility_kW > 0) r["facility_kW"] = ev.facility_kW;
    if (s.cluster.power_budget_kW > 0) r["over_power_budget"] = ev.over_power_budget;
  }
  const MemoryBreakdown& p = ev.memory.peak();
  json stages = json::array();
  for (const auto& st : ev.memory.per_stage) stages.push_back(st.peak_bytes);
  r["memory"] = {{"peak_bytes", p.peak_bytes},
                 {"device_bytes", ev.memory.device_bytes},
                 {"oom", ev.memory.oom},
                 {"peak_stage", ev.memory.peak_stage},
                 {"params_bytes", p.params_bytes},
                 {"grads_bytes", p.grads_bytes},
                 {"optimizer_bytes", p.optimizer_bytes},
                 {"activations_bytes", p.activations_bytes},
                 {"buffers_bytes", p.buffers_bytes},
                 {"workspace_bytes", p.workspace_bytes},
                 {"runtime_bytes", p.runtime_bytes},
                 {"nccl_communicators", p.nccl_communicators},
                 {"fragmentation_bytes", p.fragmentation_bytes},
                 {"per_stage_peak_bytes", stages}};
  // The vocabulary as the model has it and as this layout's TP degree pads it (vocab_divisible_by):
  // the padded one is what the output layer and the embedding run and store.
  r["model"] = {{"name", s.model.name}, {"params", ev.params}, {"flops_per_token", ev.flops_per_token},
                {"vocab", s.model.vocab}, {"vocab_padded", padded_vocab(s.model, ev.layout.tp)}};
  return r;
}

json what_if_to_json(const Scenario& s, const WhatIf& w) {
  json parts = json::array();
  for (const WhatIfRow& r : w.rows) {
    auto side = [](const Evaluation& ev) {
      return json{{"step_time_s", ev.step.step_time_s}, {"tokens_per_s", ev.tokens_per_s}, {"breakdown_s", breakdown_json(ev)}};
    };
    parts.push_back({{"part", part_name(r.part)}, {"description", part_description(r.part)}, {"faster", side(r.faster)}, {"slower", side(r.slower)}});
  }
  auto setting_rows = [](const std::vector<SettingRow>& rows) {
    json out = json::array();
    for (const SettingRow& r : rows)
      out.push_back({{"setting", r.setting}, {"description", r.description}, {"step_time_s", r.eval.step.step_time_s},
                     {"tokens_per_s", r.eval.tokens_per_s}, {"breakdown_s", breakdown_json(r.eval)}});
    return out;
  };
  return json{{"scenario", s.name},
              {"cluster", cluster_to_json(s)},
              {"factor", w.factor},
              {"base", result_to_json(s, w.base)},
              {"parts", parts},
              {"nccl_settings", setting_rows(w.settings)},
              {"fabric_settings", setting_rows(w.fabric)},
              {"sets_the_step", part_name(w.sets_the_step)},
              {"most_sensitive_to_slowdown", part_name(w.most_sensitive_to_slowdown)}};
}

json what_if_search_to_json(const Scenario& s, const WhatIfSearch& w) {
  json parts = json::array();
  for (std::size_t i = 0; i < w.rows.size(); ++i) {
    const WhatIfSearchRow& r = w.rows[i];
    const WhatIfRow& kept = w.kept.rows[i];
    auto side = [&](const Evaluation& best, const Evaluation& winner_kept) {
      json j = result_to_json(s, best);
      j["winner_kept"] = {{"step_time_s", winner_kept.step.step_time_s}, {"tokens_per_s", winner_kept.tokens_per_s}};
      return j;
    };
    parts.push_back({{"part", part_name(r.part)}, {"description", part_description(r.part)}, {"faster", side(r.faster, kept.faster)},
                     {"slower", side(r.slower, kept.slower)}});
  }
  return json{{"scenario", s.name},        {"cluster", cluster_to_json(s)}, {"factor", w.kept.factor}, {"nodes", w.nodes}, {"layouts", w.layouts},
              {"fit_in_memory", w.fit},    {"objective", s.search.objective},
              {"base", result_to_json(s, w.kept.base)}, {"parts", parts}};
}

}  // namespace trainsim
