#include "planner_commands.h"

#include <cstdio>
#include <set>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "critical_path.h"
#include "evaluation.h"
#include "gemm_shapes.h"
#include "input_error.h"
#include "html_report.h"
#include "launch_export.h"
#include "layout_search.h"
#include "result_json.h"
#include "text_report.h"
#include "trace_export.h"
#include "what_if.h"
#include "worker_pool.h"

namespace trainsim {

using nlohmann::json;

namespace {

// The network of a scenario that has more than one node at any of its sizes, else "one node".
std::string network_or_one_node(const Scenario& s) {
  int most = 0;
  for (int n : s.cluster.nodes) most = std::max(most, n);
  for (int n : s.search.nodes) most = std::max(most, n);
  return most > 1 ? describe_network(s) : "one node";
}

Layout chosen_layout(const Scenario& s, const PlannerOptions& o, int nodes) {
  if (!s.has_layout && o.layout_overrides.empty())
    throw InputError(s.file + ": layout", "the scenario has no \"layout\" block; add one or pass --layout");
  bool dp_given = s.layout_dp_given;
  Layout l = apply_layout_overrides(s.layout, o.layout_overrides, &dp_given);
  // A dp fixed in the file describes the file's node count; on other node counts it is derived.
  if (dp_given && o.layout_overrides.find("dp=") == std::string::npos && nodes != s.cluster.nodes.front()) dp_given = false;
  try {
    return resolve_layout(s, l, dp_given, nodes);
  } catch (const InputError& e) {
    throw InputError(s.file, e.what());
  }
}

void add_scaling(Evaluation& ev, double one_gpu) {
  if (one_gpu > 0 && ev.simulated) ev.scaling_efficiency_vs_1gpu = ev.tokens_per_s / ev.gpus / one_gpu;
}

}  // namespace

int run_simulate(const PlannerOptions& o, std::ostream& out) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  const int nodes = o.nodes > 0 ? o.nodes : s.cluster.nodes.front();
  const Layout l = chosen_layout(s, o, nodes);
  EvalOptions eo;
  eo.mode = o.mode == "full" ? sim::SimMode::full : sim::SimMode::symmetric;
  eo.record_timeline = !o.trace.empty();
  if (o.trace_gpus_given) eo.timeline_gpus = parse_trace_gpus(o.trace_gpus, l.gpus());
  eo.straggler_baseline = true;
  Evaluation ev = evaluate(s, l, nodes, eo);
  add_scaling(ev, single_gpu_tokens_per_s(s, l.micro_batch));
  if (!o.trace.empty()) {
    check_traced_gpus(ev.step, eo.timeline_gpus);
    write_chrome_trace(ev.step, o.trace);
  }
  if (o.json) {
    json r = result_to_json(s, ev);
    r["scenario"] = s.name;
    r["cluster"] = cluster_to_json(s);
    r["mode"] = ev.step.full_because ? "full" : o.mode;
    if (!o.trace.empty()) {
      const CriticalPath c = summarize_critical_path(ev.step, l);
      json stages = json::array();
      for (const auto& [stage, seconds] : c.by_stage) stages.push_back({{"stage", stage}, {"seconds", seconds}});
      r["trace"] = {{"file", o.trace},
                    {"slices", ev.step.timeline.size()},
                    {"critical_path", {{"slices", c.slices}, {"seconds", c.seconds}, {"contention_s", c.contention_s}, {"by_stage", stages}}}};
    }
    out << r.dump(2) << "\n";
  } else {
    print_evaluation(out, s, ev);
    if (!o.trace.empty()) out << "\n  " << describe_trace(ev.step, l, o.trace) << "\n";
  }
  return 0;
}

int run_sweep(const PlannerOptions& o, std::ostream& out) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  const std::vector<int> counts = o.nodes_list.empty() ? s.cluster.nodes : o.nodes_list;
  for (std::size_t i = 0; i < o.nodes_list.size(); ++i)  // the scenario's own lists are checked as it loads
    for (std::size_t j = 0; j < i; ++j)
      if (o.nodes_list[i] == o.nodes_list[j]) throw InputError("--nodes", std::to_string(o.nodes_list[i]) + " is given twice");
  for (int n : counts)
    if (n < 1) throw InputError("--nodes", "node counts must be positive, found " + std::to_string(n));
  // Each size's layout first, in order (a layout that does not fit a size is refused naming the
  // first such size), then their steps on the worker pool.
  std::vector<Layout> layouts;
  for (int n : counts) layouts.push_back(chosen_layout(s, o, n));
  std::vector<Evaluation> evs(counts.size());
  EvalOptions eo;
  eo.straggler_baseline = true;
  WorkerPool::shared().run_each(o.threads, counts.size(), [&](std::size_t i) { evs[i] = evaluate(s, layouts[i], counts[i], eo); });
  const double one_gpu = single_gpu_tokens_per_s(s, evs.front().layout.micro_batch);
  for (auto& ev : evs) add_scaling(ev, one_gpu);
  const double base_per_gpu = evs.front().tokens_per_s / evs.front().gpus;
  if (o.json) {
    json arr = json::array();
    for (const auto& ev : evs) {
      json r = result_to_json(s, ev);
      r["scaling_efficiency_vs_smallest"] = ev.tokens_per_s / ev.gpus / base_per_gpu;
      arr.push_back(r);
    }
    out << json{{"scenario", s.name}, {"cluster", cluster_to_json(s)}, {"sweep", arr}}.dump(2) << "\n";
    return 0;
  }
  char line[512];
  out << s.name << ": " << s.model.name << " on " << s.hardware.name << ", " << network_or_one_node(s) << "\n"
      << profile_note(s.hardware);
  std::snprintf(line, sizeof line, "%6s %6s  %-44s %10s %12s %6s %8s %8s  %s\n", "nodes", "GPUs", "layout", "step",
                "tokens/s", "MFU", "eff/1GPU", "eff/min", "largest exposed overhead");
  out << line;
  for (const auto& ev : evs) {
    int worst = sim::kBubble;
    for (int c : {sim::kTpComm, sim::kPpComm, sim::kDpComm, sim::kBubble})
      if (ev.step.breakdown_s[c] > ev.step.breakdown_s[worst]) worst = c;
    char why[96];
    std::snprintf(why, sizeof why, "%s %.0f%%", sim::category_name(worst), 100.0 * ev.step.breakdown_s[worst] / ev.step.step_time_s);
    std::snprintf(line, sizeof line, "%6d %6d  %-44s %10s %12.0f %5.1f%% %7.1f%% %7.1f%%  %s%s\n", ev.nodes, ev.gpus,
                  describe_short(ev.layout).c_str(),
                  format_seconds(ev.step.step_time_s).c_str(), ev.tokens_per_s, 100 * ev.mfu,
                  100 * ev.scaling_efficiency_vs_1gpu, 100 * ev.tokens_per_s / ev.gpus / base_per_gpu, why,
                  ev.memory.oom ? "  (OOM)" : "");
    out << line;
  }
  {
    std::vector<std::pair<std::string, const Evaluation*>> rows;
    for (const auto& ev : evs) rows.push_back({format_nodes(ev.nodes), &ev});
    out << every_gpu_note(rows);
  }
  if (s.stragglers.given) {
    out << "\nstragglers at each size, and what they cost the step\n";
    for (const auto& ev : evs) {
      if (!ev.simulated) continue;
      const auto& st = ev.stragglers;
      std::snprintf(line, sizeof line, "%6d %-5s", ev.nodes, ev.nodes == 1 ? "node" : "nodes");
      out << line;
      if (s.stragglers.speed_stdev > 0 || !s.stragglers.gpus.empty()) {
        std::snprintf(line, sizeof line, "  slowest GPU %6d at %5.1f%%, %5d under 95%%", st.slowest_gpu, 100 * st.slowest_speed, st.below_95);
        out << line;
      }
      if (!s.stragglers.nics.empty()) {
        std::snprintf(line, sizeof line, "  %d slow NIC%s", st.slow_nics_here, st.slow_nics_here == 1 ? "" : "s");
        out << line;
      }
      std::snprintf(line, sizeof line, "  step %s against %s (%+.1f%%", format_seconds(ev.step.step_time_s).c_str(),
                    format_seconds(st.step_without_s).c_str(), 100 * (ev.step.step_time_s / st.step_without_s - 1));
      out << line;
      if (st.step_upper_s > 0) {
        std::snprintf(line, sizeof line, "; upper bound %+.1f%%", 100 * (st.step_upper_s / st.step_without_s - 1));
        out << line;
      }
      out << ")\n";
    }
  }
  if (s.training.tokens_total > 0) {
    // Capacity: time, GPU-hours and cost to train the scenario's tokens at each size.
    out << "\ntraining " << s.training.tokens_total << " tokens" << (s.reliability.given ? ", failures and checkpoints included" : "") << ":\n";
    int smallest = 0;
    for (const auto& ev : evs) {
      std::snprintf(line, sizeof line, "%6d %-5s  %9s  %10s GPU-hours", ev.nodes, ev.nodes == 1 ? "node" : "nodes",
                    format_seconds(ev.time_to_train_s).c_str(),
                    format_count(ev.time_to_train_s / 3600.0 * ev.gpus).c_str());
      out << line;
      if (s.reliability.given) {
        std::snprintf(line, sizeof line, "  goodput %5.1f%% (a failure every %s, checkpoint every %s)", 100 * ev.reliability.goodput,
                      format_seconds(ev.reliability.job_mtbf_s).c_str(), format_seconds(ev.reliability.interval_s).c_str());
        out << line;
      }
      if (s.cost.gpu_hour_usd > 0) {
        std::snprintf(line, sizeof line, "  $%s", format_count(ev.cost_usd).c_str());
        out << line;
        if (s.cost.budget_usd > 0 && ev.cost_usd > s.cost.budget_usd) out << "  (over budget)";
      }
      if (ev.facility_kW > 0) {
        std::snprintf(line, sizeof line, "  %s at %s", format_energy(ev.energy_kWh).c_str(), format_power(ev.facility_kW).c_str());
        out << line;
        if (s.cost.energy_usd_per_kWh > 0) out << " ($" << format_count(ev.energy_usd) << ")";
        if (ev.over_power_budget) out << "  (over the power budget)";
      }
      if (ev.memory.oom) out << "  (out of memory)";
      if (meets_deadline(s, ev) && (smallest == 0 || ev.nodes < smallest)) smallest = ev.nodes;
      out << "\n";
    }
    for (std::size_t i = 1; i < evs.size() && s.reliability.given; ++i) {
      const auto& a = evs[i - 1];
      const auto& b = evs[i];
      if (b.time_to_train_s > a.time_to_train_s && b.tokens_per_s >= a.tokens_per_s) {
        std::snprintf(line, sizeof line,
                      "longer to train on more GPUs: %d nodes step faster than %d (%.0f against %.0f tokens/s) but fail every %s "
                      "(against %s), so they keep %.1f%% of their time for training (against %.1f%%)\n",
                      b.nodes, a.nodes, b.tokens_per_s, a.tokens_per_s, format_seconds(b.reliability.job_mtbf_s).c_str(),
                      format_seconds(a.reliability.job_mtbf_s).c_str(), 100 * b.reliability.goodput, 100 * a.reliability.goodput);
        out << line;
      }
    }
    if (s.training.deadline_days > 0) {
      if (smallest > 0)
        out << "smallest cluster that meets the " << s.training.deadline_days << "-day deadline"
            << (s.cluster.power_budget_kW > 0 ? " within the power budget" : "") << ": " << format_nodes(smallest) << "\n";
      else out << "no swept size meets the " << s.training.deadline_days << "-day deadline\n";
    }
  }
  for (std::size_t i = 1; i < evs.size(); ++i)
    if (evs[i].tokens_per_s < evs[i - 1].tokens_per_s) out << "\nslower with more GPUs: " << why_slower(evs[i - 1], evs[i]) << "\n";
  return 0;
}

int run_search(const PlannerOptions& o, std::ostream& out, std::ostream& progress) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  if (!s.has_search) throw InputError(s.file + ": search", "the scenario has no \"search\" block");
  const auto cands = enumerate_layouts(s);
  if (cands.empty()) throw InputError(s.file + ": search", "no layout in the search space satisfies the constraints");
  SearchOptions so;
  so.threads = o.threads;
  const bool tty = isatty(fileno(stderr)) && !o.json;
  if (tty) {
    const auto t0 = std::chrono::steady_clock::now();
    so.progress = [&progress, t0](std::size_t done, std::size_t total) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double eta = done > 0 ? el * (total - done) / done : 0;
      const int bar = static_cast<int>(30.0 * done / total);
      char buf[160];
      std::snprintf(buf, sizeof buf, "\r[%-30s] %zu/%zu  ETA %.1fs ", std::string(bar, '=').c_str(), done, total, eta);
      progress << buf << std::flush;
    };
  }
  const int top = o.top > 0 ? o.top : s.search.top;
  so.keep = static_cast<std::size_t>(std::max(1, top));
  so.shard = static_cast<std::size_t>(o.sharding.rank);
  so.shards = static_cast<std::size_t>(o.sharding.size);
  if (o.sharding.size > 1) so.progress = nullptr;
  // The ranks skip by what all of them have simulated: their best values, merged between batches.
  if (o.sharding.size > 1 && o.sharding.all_reduce_max)
    so.share = [&o](std::vector<double>& values, bool more) {
      values.push_back(more ? 1.0 : 0.0);
      o.sharding.all_reduce_max(values.data(), static_cast<int>(values.size()));
      const bool any = values.back() > 0;
      values.pop_back();
      return any;
    };
  SearchResult r = search_layouts(s, cands, so);
  if (o.sharding.gather) o.sharding.gather(s, cands, r, top);
  if (o.sharding.rank != 0) return 0;
  if (tty) progress << "\n";
  // With several node counts: the best layout at each, and how the sizes compare.
  const std::vector<const Evaluation*> per_size = best_per_size(r.ranked);
  const bool sizes = per_size.size() > 1;
  const double smallest_per_gpu = sizes ? per_size.front()->tokens_per_s / per_size.front()->gpus : 0;
  if (o.json) {
    json arr = json::array();
    for (std::size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < top; ++i) {
      json j = result_to_json(s, r.ranked[i]);
      if (i > 0) j["why_not_first"] = why_lost(s, r.ranked.front(), r.ranked[i]);
      arr.push_back(j);
    }
    json doc{{"scenario", s.name}, {"cluster", cluster_to_json(s)}, {"objective", s.search.objective}, {"candidates", arr},
             {"evaluated", r.evaluated}, {"pruned_oom", r.pruned_oom}, {"pruned_bound", r.pruned_bound}, {"wall_s", r.wall_s}};
    if (sizes) {
      json best = json::array();
      for (const Evaluation* ev : per_size) {
        json j = result_to_json(s, *ev);
        j["scaling_efficiency_vs_smallest"] = ev->tokens_per_s / ev->gpus / smallest_per_gpu;
        best.push_back(j);
      }
      doc["best_per_size"] = best;
    }
    out << doc.dump(2) << "\n";
    return 0;
  }
  char line[320];
  out << s.name << ": " << s.model.name << " on " << s.hardware.name << ", " << network_or_one_node(s) << "\n"
      << profile_note(s.hardware);
  std::snprintf(line, sizeof line, "%zu layouts, %zu pruned by memory, %zu simulated in %.2f s (objective %s)\n", r.evaluated, r.pruned_oom, r.evaluated - r.pruned_oom - r.pruned_bound, r.wall_s, s.search.objective.c_str());
  out << line;
  if (r.pruned_bound > 0) {
    std::snprintf(line, sizeof line,
                  "%zu more fit in memory but were not simulated: their compute alone bounds their step too long for the top %d "
                  "or the best at their size\n",
                  r.pruned_bound, top);
    out << line;
  }
  out << "\n";
  if (s.stragglers.given)
    out << "Steps include the scenario's stragglers: the slowest data-parallel replica's, each replica simulated on its own.\n\n";
  std::snprintf(line, sizeof line, "%3s %5s  %-44s %9s %11s %6s %9s  %s\n", "#", "nodes", "layout", "step", "tokens/s",
                "MFU", "mem", "why not first");
  out << line;
  for (std::size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < top; ++i) {
    const auto& ev = r.ranked[i];
    std::snprintf(line, sizeof line, "%3zu %5d  %-44s %9s %11.0f %5.1f%% %9s  %s\n", i + 1, ev.nodes,
                  describe_short(ev.layout).c_str(), format_seconds(ev.step.step_time_s).c_str(), ev.tokens_per_s,
                  100 * ev.mfu, format_bytes(ev.memory.peak().peak_bytes).c_str(),
                  i == 0 ? "-" : why_lost(s, r.ranked.front(), ev).c_str());
    out << line;
  }
  {
    std::vector<std::pair<std::string, const Evaluation*>> rows;
    for (std::size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < top; ++i) {
      std::snprintf(line, sizeof line, "#%zu", i + 1);
      rows.push_back({line, &r.ranked[i]});
    }
    out << every_gpu_note(rows);
  }
  if (sizes) {
    out << "\nbest layout at each size" << (s.reliability.given && s.training.tokens_total > 0 ? " (failures and checkpoints included)" : "")
        << ":\n";
    std::snprintf(line, sizeof line, "%5s %6s  %-44s %9s %11s %6s %8s", "nodes", "GPUs", "layout", "step", "tokens/s", "MFU", "eff/min");
    out << line << (s.training.tokens_total > 0 ? "  time to train" : "") << (s.reliability.given ? "  goodput" : "")
        << (s.training.tokens_total > 0 && s.cost.gpu_hour_usd > 0 ? "        cost" : "") << "\n";
    int smallest = 0;
    for (const Evaluation* ev : per_size) {
      std::snprintf(line, sizeof line, "%5d %6d  %-44s %9s %11.0f %5.1f%% %7.1f%%", ev->nodes, ev->gpus, describe_short(ev->layout).c_str(),
                    format_seconds(ev->step.step_time_s).c_str(), ev->tokens_per_s, 100 * ev->mfu,
                    100 * ev->tokens_per_s / ev->gpus / smallest_per_gpu);
      out << line;
      if (s.training.tokens_total > 0) {
        std::snprintf(line, sizeof line, "  %13s", format_seconds(ev->time_to_train_s).c_str());
        out << line;
      }
      if (s.reliability.given) {
        std::snprintf(line, sizeof line, "  %6.1f%%", 100 * ev->reliability.goodput);
        out << line;
      }
      if (s.training.tokens_total > 0 && s.cost.gpu_hour_usd > 0) {
        std::string cost("$");
        cost.append(format_count(ev->cost_usd));
        std::snprintf(line, sizeof line, "  %10s", cost.c_str());
        out << line;
      }
      if (ev->over_power_budget) out << "  (over the power budget: " << format_power(ev->facility_kW) << ")";
      out << "\n";
      if (meets_deadline(s, *ev) && smallest == 0) smallest = ev->nodes;
    }
    std::vector<std::pair<std::string, const Evaluation*>> rows;
    for (const Evaluation* ev : per_size) rows.push_back({format_nodes(ev->nodes), ev});
    out << every_gpu_note(rows);
    if (s.training.tokens_total > 0 && s.training.deadline_days > 0) {
      if (smallest > 0)
        out << "smallest cluster that meets the " << s.training.deadline_days << "-day deadline"
            << (s.cluster.power_budget_kW > 0 ? " within the power budget" : "") << ": " << format_nodes(smallest) << "\n";
      else out << "no searched size meets the " << s.training.deadline_days << "-day deadline\n";
    }
  }
  bool compressed = false;
  for (std::size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < top; ++i)
    compressed |= r.ranked[i].layout.compression.kind != Compression::Kind::none;
  if (compressed)
    out << "\nnote: gradient compression changes convergence (steps to reach a loss), which is not simulated; "
           "compare compressed layouts on time per step only.\n";
  if (r.ranked.empty()) out << "every layout is out of memory; for example " << describe(r.oom.front().layout) << ": "
                            << oom_phrase(r.oom.front()) << "\n";
  return 0;
}

}  // namespace trainsim

namespace trainsim {

int run_what_if(const PlannerOptions& o, std::ostream& out) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  if (o.search) {
    if (!o.layout_overrides.empty()) throw InputError("--layout", "what-if --search picks the layouts itself; leave out --layout");
    if (!s.has_search) throw InputError(s.file + ": search", "the scenario has no \"search\" block for what-if --search");
    const int nodes = o.nodes > 0 ? o.nodes : !s.search.nodes.empty() ? s.search.nodes.front() : s.cluster.nodes.front();
    const WhatIfSearch w = what_if_search(s, nodes, o.factor, o.threads, "--factor");
    if (o.json) out << what_if_search_to_json(s, w).dump(2) << "\n";
    else print_what_if_search(out, s, w);
    return 0;
  }
  const int nodes = o.nodes > 0 ? o.nodes : s.cluster.nodes.front();
  const Layout l = chosen_layout(s, o, nodes);
  const WhatIf w = what_if(s, l, nodes, o.factor, "--factor", {}, o.threads);
  if (o.json) out << what_if_to_json(s, w).dump(2) << "\n";
  else print_what_if(out, s, w);
  return 0;
}

int run_gemm_shapes(const PlannerOptions& o, std::ostream& out) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  // The (tp, micro-batch) pairs the scenario can run: its layout, its search space's valid layouts,
  // and what `planner validate` runs (by default micro-batches 1, 2, 4 and 8 at tp 1).
  std::set<std::pair<int, int>> runs;
  std::vector<ModelConfig> models{s.model};
  if (s.has_layout) runs.insert({s.layout.tp, s.layout.micro_batch});
  if (s.has_search)
    for (const Candidate& c : enumerate_layouts(s)) runs.insert({c.layout.tp, c.layout.micro_batch});
  if (s.has_validate) {
    if (!s.validate.models.empty()) models = s.validate.models;
    for (int tp : s.validate.tp.empty() ? std::vector<int>{1} : s.validate.tp)
      for (int mb : s.validate.micro_batch.empty() ? std::vector<int>{1, 2, 4, 8} : s.validate.micro_batch) runs.insert({tp, mb});
  }
  std::set<GemmUse> shapes;
  std::string names, pairs;
  for (const ModelConfig& m : models) {
    names += (names.empty() ? "" : ", ") + m.name;
    for (const auto& [tp, mb] : runs)
      if (m.heads % tp == 0 && m.ffn_hidden % tp == 0)
        for (const GemmUse& g : model_gemm_shapes(m, tp, mb)) shapes.insert(g);
  }
  for (const auto& [tp, mb] : runs) pairs += (pairs.empty() ? "" : ", ") + ("tp " + std::to_string(tp) + " mb " + std::to_string(mb));
  out << format_gemm_shapes({shapes.begin(), shapes.end()}, "the GEMMs of " + s.name + " (" + names + "; " + pairs + "): " +
                                                                std::to_string(shapes.size()) + " shapes");
  return 0;
}

int run_export(const PlannerOptions& o, std::ostream& out, std::ostream& warnings) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  const int nodes = o.nodes > 0 ? o.nodes : s.cluster.nodes.front();
  const Layout l = chosen_layout(s, o, nodes);
  // The checkpoint interval depends on the step time: simulated where the scenario gives failure rates.
  Evaluation ev;
  if (s.reliability.given) ev = evaluate(s, l, nodes, EvalOptions{});
  const LaunchExport e = export_launch(s, l, nodes, s.reliability.given ? &ev.reliability : nullptr);
  // A launch that the memory model says cannot start is exported all the same (the estimate may be
  // wrong for the user's stack), but says so where it is read first.
  const MemoryResult mem = evaluate_memory(s, l, nodes).memory;
  const std::string oom = mem.oom ? "predicted out of memory: " + memory_need(mem) : "";
  if (mem.oom) warnings << "warning: " << oom << "\n";
  if (o.json) {
    out << json{{"layout", layout_to_json(l)}, {"nodes", nodes}, {"batch_arithmetic", e.batch_arithmetic},
                {"megatron_args", e.megatron_args}, {"deepspeed_config", json::parse(e.deepspeed_config)},
                {"launch_command", e.launch_command}, {"notes", e.notes},
                {"memory", {{"peak_bytes", mem.peak().peak_bytes}, {"peak_stage", mem.peak_stage},
                            {"device_bytes", mem.device_bytes}, {"oom", mem.oom}}}}.dump(2)
        << "\n";
    return 0;
  }
  out << "# " << s.name << ": " << describe(l) << " on " << format_nodes(nodes) << "\n# " << e.batch_arithmetic << "\n";
  if (mem.oom) out << "# WARNING: " << oom << "\n";
  out << "\n## Megatron-LM arguments\n" << e.megatron_args << "\n## DeepSpeed config (ds_config.json)\n" << e.deepspeed_config
      << "\n\n## Slurm + torchrun\n" << e.launch_command;
  for (const auto& n : e.notes) out << "\nnote: " << n;
  out << "\n";
  return 0;
}

}  // namespace trainsim

namespace trainsim {

int run_report(const PlannerOptions& o) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  const std::string html = render_report(s, o.top > 0 ? o.top : (s.has_search ? s.search.top : 1));
  const std::string tmp = o.output + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) throw InputError("-o " + o.output, "cannot write the report here");
  const bool ok = std::fwrite(html.data(), 1, html.size(), f) == html.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw InputError("-o " + o.output, "failed while writing the report");
  }
  if (std::rename(tmp.c_str(), o.output.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError("-o " + o.output, "cannot move the report into place");
  }
  return 0;
}

}  // namespace trainsim
