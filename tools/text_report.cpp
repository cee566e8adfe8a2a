#include "text_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace trainsim {

std::string format_bytes(double b) {
  char buf[64];
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string format_seconds(double s) {
  char buf[64];
  if (!std::isfinite(s)) return "never";
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1.0) std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  else if (s < 100.0) std::snprintf(buf, sizeof buf, "%.2f s", s);
  else if (s < 3600.0) std::snprintf(buf, sizeof buf, "%.1f min", s / 60.0);
  else if (s < 3 * 86400.0) std::snprintf(buf, sizeof buf, "%.1f h", s / 3600.0);
  else std::snprintf(buf, sizeof buf, "%.1f days", s / 86400.0);
  return buf;
}

std::string format_count(double x) {
  if (!std::isfinite(x)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

std::string format_nodes(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

std::string describe_fabric(const Scenario& s) {
  const NetworkSpec& n = s.cluster.network;
  if (n.fabric == "single-switch") return "one switch";
  std::string out = n.fabric;
  if (n.oversubscription == 1.0) return out + " (non-blocking)";
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%g", n.oversubscription);
  const int per_leaf = network_for(s, s.cluster.nodes.front()).shape.nodes_per_leaf();
  return out + ", " + ratio + ":1 to the spine, " + format_nodes(per_leaf) +
         (n.fabric == "rail-optimized" ? " to a group of rail switches" : " to a leaf");
}

std::string describe_network(const Scenario& s) {
  const NetworkSpec& n = s.cluster.network;
  char nics[64];
  std::snprintf(nics, sizeof nics, "%d x %g Gb/s NICs a node, ", n.nics_per_node, n.nic_Gbps);
  return nics + describe_fabric(s);
}

std::string one_leaf_note(const Scenario& s, int nodes) {
  if (nodes <= 1 || !under_one_leaf(s, nodes)) return "";
  const bool rails = s.cluster.network.fabric == "rail-optimized";
  return "the " + std::to_string(nodes) + " nodes fit under one " + (rails ? "group of rail switches: their" : "leaf switch: its") +
         " uplinks to the spine carry none of this step's traffic";
}

std::string memory_need(const MemoryResult& m) {
  return "stage " + std::to_string(m.peak_stage) + " needs " + format_bytes(m.peak().peak_bytes) + " of " + format_bytes(m.device_bytes);
}

namespace {
// Three significant figures at most, without switching to exponent notation: 970, 12.5, 1.00.
std::string three_figures(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, unit);
  return buf;
}
// `t` against `base` in percent, a change that rounds to nothing shown as +0.0 (never -0.0).
double change_pct(double t, double base) {
  const double pct = 100.0 * (t / base - 1);
  return std::abs(pct) < 0.05 ? 0.0 : pct;
}
}  // namespace

std::string profile_note(const HardwareProfile& hp) {
  if (hp.provenance.source == "measured") return "";
  if (hp.provenance.source == "derived")
    return "note: " + hp.name + " is a derived profile (datasheets and a calibrated part's efficiency): its times are estimates\n";
  return "note: " + hp.name + " is a " + hp.provenance.source + " profile, not measured on its part: its times are estimates\n";
}

std::string every_gpu_reason(const char* why) { return std::string(why) + ", so one GPU per stage cannot stand for the rest"; }

std::string format_energy(double kWh) {
  if (!std::isfinite(kWh)) return "-";
  if (kWh < 1e3) return three_figures(kWh, "kWh");
  if (kWh < 1e6) return three_figures(kWh / 1e3, "MWh");
  return three_figures(kWh / 1e6, "GWh");
}

std::string format_power(double kW) {
  if (kW < 1e3) return three_figures(kW, "kW");
  return three_figures(kW / 1e3, "MW");
}

std::string why_slower(const Evaluation& a, const Evaluation& b) {
  static const char* const phrases[sim::kCategories] = {"compute", "recompute", "TP communication", "PP communication",
                                                        "DP communication", "the pipeline bubble", "the optimizer",
                                                        "waiting for data"};
  int grew = sim::kDpComm;
  for (int c = 0; c < sim::kCategories; ++c)
    if (b.step.breakdown_s[c] - a.step.breakdown_s[c] > b.step.breakdown_s[grew] - a.step.breakdown_s[grew]) grew = c;
  char line[320];
  std::snprintf(line, sizeof line, "%d nodes give %.0f tokens/s, fewer than %.0f on %d node%s; %s exposed %s of a %s step (was %s)",
                b.nodes, b.tokens_per_s, a.tokens_per_s, a.nodes, a.nodes == 1 ? "" : "s", phrases[grew],
                format_seconds(b.step.breakdown_s[grew]).c_str(), format_seconds(b.step.step_time_s).c_str(),
                format_seconds(a.step.breakdown_s[grew]).c_str());
  return line;
}

std::string straggler_summary(const Scenario& s, const Evaluation& ev) {
  const auto& st = ev.stragglers;
  char line[512];
  std::string given;
  auto add = [&](const std::string& part) { given += (given.empty() ? "" : ", ") + part; };
  if (s.stragglers.speed_stdev > 0) {
    std::snprintf(line, sizeof line, "speeds spread %.1f%%", 100 * s.stragglers.speed_stdev);
    add(line);
  }
  if (!s.stragglers.gpus.empty()) {
    const int named = static_cast<int>(s.stragglers.gpus.size());
    if (st.named_here == named) std::snprintf(line, sizeof line, "%d named GPU%s", named, named == 1 ? "" : "s");
    else std::snprintf(line, sizeof line, "%d named GPU%s, %d in these %d GPUs", named, named == 1 ? "" : "s", st.named_here, ev.gpus);
    add(line);
  }
  if (!s.stragglers.nics.empty()) {
    const int named = static_cast<int>(s.stragglers.nics.size());
    if (st.slow_nics_here == named) std::snprintf(line, sizeof line, "%d slow NIC%s", named, named == 1 ? "" : "s");
    else std::snprintf(line, sizeof line, "%d slow NIC%s, %d on these %d nodes", named, named == 1 ? "" : "s", st.slow_nics_here, ev.nodes);
    add(line);
  }
  std::string out = "stragglers (" + given + "): ";
  if (st.slowest_speed < 1)
    std::snprintf(line, sizeof line, "slowest GPU %d at %.1f%% speed, %d GPU%s under 95%%", st.slowest_gpu, 100 * st.slowest_speed,
                  st.below_95, st.below_95 == 1 ? "" : "s");
  else
    std::snprintf(line, sizeof line, "no GPU below nominal speed");
  out += line;
  if (st.slow_nics_here > 0) {
    std::snprintf(line, sizeof line, ", slowest NIC at %.0f%% of its rate", 100 * st.slowest_nic_speed);
    out += line;
  }
  if (st.step_without_s > 0 && ev.simulated) {
    std::snprintf(line, sizeof line, "; step %s against %s without them (%+.1f%%)", format_seconds(ev.step.step_time_s).c_str(),
                  format_seconds(st.step_without_s).c_str(), 100 * (ev.step.step_time_s / st.step_without_s - 1));
    out += line;
  }
  if (ev.simulated && st.replicas_simulated > 0) {
    std::snprintf(line, sizeof line,
                  "\n  (symmetric mode: replica %d is the slowest of %d data-parallel replicas; the %d that no other is slower than "
                  "at every stage were each simulated on its own",
                  st.slowest_replica, ev.layout.dp, st.replicas_simulated);
    out += line;
    if (st.step_upper_s > 0 && st.step_without_s > 0) {
      std::snprintf(line, sizeof line, ". Every stage at its slowest GPU and NIC of any replica, an upper bound: %s, %+.1f%%",
                    format_seconds(st.step_upper_s).c_str(), 100 * (st.step_upper_s / st.step_without_s - 1));
      out += line;
    }
    out += "; --mode full places every GPU and NIC)";
  }
  return out;
}

std::string every_gpu_note(const std::vector<std::pair<std::string, const Evaluation*>>& rows) {
  // By how much was simulated and why, in order of first appearance.
  std::vector<std::tuple<bool, const char*, std::string>> by_reason;
  for (const auto& [label, ev] : rows) {
    const bool every_gpu = ev->step.full_because != nullptr;
    const char* why = every_gpu ? ev->step.full_because : ev->step.every_replica_because;
    if (!why) continue;
    auto it = std::find_if(by_reason.begin(), by_reason.end(),
                           [&](const auto& r) { return std::get<0>(r) == every_gpu && std::string(std::get<1>(r)) == why; });
    if (it == by_reason.end()) by_reason.push_back({every_gpu, why, label});
    else std::get<2>(*it) += ", " + label;
  }
  std::string note;
  for (const auto& [every_gpu, why, labels] : by_reason)
    note += (every_gpu ? "note: every GPU simulated for " + labels + " ("
                       : "note: one GPU per tensor-parallel group simulated for " + labels + " (every replica of every stage: ") +
            every_gpu_reason(why) + ")\n";
  return note;
}

void print_evaluation(std::ostream& os, const Scenario& s, const Evaluation& ev) {
  char line[512];  // the longest line (reliability, async) is about 250 characters
  os << s.name << ": " << s.model.name << " on " << ev.nodes << " x " << s.cluster.gpus_per_node << " "
     << s.hardware.name << " (" << ev.gpus << " GPUs)";
  if (s.cluster.network.allreduce_algorithm != "auto") os << ", all-reduce forced to " << s.cluster.network.allreduce_algorithm;
  if (s.cluster.network.nvls) os << ", NVLS on";
  os << "\n" << profile_note(s.hardware);
  if (ev.nodes > 1) os << "network " << describe_network(s) << "\n";
  os << "layout  " << describe(ev.layout) << "\n";
  if (ev.simulated) {
    std::snprintf(line, sizeof line, "step    %s   %.0f tokens/s   MFU %.1f%%", format_seconds(ev.step.step_time_s).c_str(),
                  ev.tokens_per_s, 100.0 * ev.mfu);
    os << line;
    if (ev.scaling_efficiency_vs_1gpu > 0) {
      std::snprintf(line, sizeof line, "   scaling efficiency %.1f%%", 100.0 * ev.scaling_efficiency_vs_1gpu);
      os << line;
    }
    if (ev.memory.oom)
      os << "\nOUT OF MEMORY: " << memory_need(ev.memory) << " (the step is timed as if it fit)";
    os << "\n\n  exposed time on the critical path (GPU 0, first stage)\n";
    for (int c = 0; c < sim::kCategories; ++c) {
      const double t = ev.step.breakdown_s[c];
      const double frac = ev.step.step_time_s > 0 ? t / ev.step.step_time_s : 0;
      const int bar = static_cast<int>(frac * 40 + 0.5);
      std::snprintf(line, sizeof line, "  %-10s %11s %5.1f%%  %s\n", sim::category_name(c), format_seconds(t).c_str(),
                    100 * frac, std::string(bar, '#').c_str());
      os << line;
    }
    const int m = std::max(1, s.training.global_batch / (ev.layout.dp * ev.layout.micro_batch));
    if (ev.step.simulated_microbatches > 0 && ev.step.simulated_microbatches < m)
      os << "  (" << m << " micro-batches per step, read off the steady state of " << ev.step.simulated_microbatches
         << " simulated ones)\n";
    if (ev.step.full_because)
      os << "  (every GPU simulated: " << every_gpu_reason(ev.step.full_because) << ")\n";
    if (ev.step.every_replica_because)
      os << "  (" << ev.step.simulated_gpus << " GPUs simulated, one per tensor-parallel group of every replica of every stage: "
         << every_gpu_reason(ev.step.every_replica_because) << ")\n";
    if (s.data.given) {
      std::snprintf(line, sizeof line, "\n  input pipeline: %s per step (loaders on %d node%s %s, storage %s)%s\n",
                    format_seconds(ev.input.per_step_s).c_str(), ev.input.loading_nodes, ev.input.loading_nodes == 1 ? "" : "s",
                    format_seconds(ev.input.loader_s).c_str(), format_seconds(ev.input.storage_s).c_str(),
                    ev.step.breakdown_s[sim::kDataWait] > 0 ? ": the step waits for data" : ", hidden under the step");
      os << line;
    }
    if (ev.stragglers.given) os << "\n  " << straggler_summary(s, ev) << "\n";
    if (s.reliability.given) {
      const ReliabilityResult& rr = ev.reliability;
      std::string ckpt = format_seconds(rr.checkpoint_write_s);
      if (s.reliability.async_checkpoint) ckpt += " in the background after a " + format_seconds(rr.checkpoint_blocking_s) + " copy";
      std::snprintf(line, sizeof line,
                    "\n  reliability: a failure every %s across %d GPUs; checkpoint of %s written in %s every %.0f steps (%s), "
                    "restart %s: goodput %.1f%%\n",
                    format_seconds(rr.job_mtbf_s).c_str(), ev.gpus, format_bytes(rr.checkpoint_bytes).c_str(), ckpt.c_str(),
                    rr.interval_steps, format_seconds(rr.interval_s).c_str(), format_seconds(rr.restart_s).c_str(), 100 * rr.goodput);
      os << line;
    }
    if (s.training.tokens_total > 0) {
      os << "\n  time to train " << format_seconds(ev.time_to_train_s) << " for " << s.training.tokens_total << " tokens";
      if (s.reliability.given) os << " (failures and checkpoints included)";
      std::snprintf(line, sizeof line, ", %s GPU-hours", format_count(ev.time_to_train_s / 3600.0 * ev.gpus).c_str());
      os << line;
      if (s.cost.gpu_hour_usd > 0) {
        std::snprintf(line, sizeof line, ", $%s", format_count(ev.cost_usd).c_str());
        os << line;
      }
      os << "\n";
      if (ev.facility_kW > 0) {
        os << "  energy " << format_energy(ev.energy_kWh) << " at the nodes' maximum power (" << format_power(ev.facility_kW);
        if (s.cost.pue > 1) os << " with PUE " << s.cost.pue;
        os << ", an upper bound)";
        if (s.cost.energy_usd_per_kWh > 0) {
          std::snprintf(line, sizeof line, ", $%s of electricity", format_count(ev.energy_usd).c_str());
          os << line;
        }
        os << "\n";
      }
    }
  } else {
    os << "not simulated: out of memory\n";
  }
  const MemoryBreakdown& p = ev.memory.peak();
  os << "\n  memory, peak rank (stage " << ev.memory.peak_stage << ")\n";
  auto row = [&](const char* name, double b) {
    std::snprintf(line, sizeof line, "  %-13s %12s\n", name, format_bytes(b).c_str());
    os << line;
  };
  row("parameters", p.params_bytes);
  row("gradients", p.grads_bytes);
  row("optimizer", p.optimizer_bytes);
  row("activations", p.activations_bytes);
  row("buffers", p.buffers_bytes);
  if (p.runtime_measured)
    std::snprintf(line, sizeof line, "  %-13s %12s  CUDA context and %d NCCL communicator%s\n", "runtime",
                  format_bytes(p.runtime_bytes).c_str(), p.nccl_communicators, p.nccl_communicators == 1 ? "" : "s");
  else
    std::snprintf(line, sizeof line, "  %-13s %12s  fixed allowance (the profile measured no runtime memory)\n", "runtime",
                  format_bytes(p.runtime_bytes).c_str());
  os << line;
  std::snprintf(line, sizeof line, "  %-13s %12s  %.0f%% of activations and buffers\n", "fragmentation",
                format_bytes(p.fragmentation_bytes).c_str(), 100 * kFragmentationFraction);
  os << line;
  std::snprintf(line, sizeof line, "  %-13s %12s of %s%s\n", "peak", format_bytes(p.peak_bytes).c_str(),
                format_bytes(ev.memory.device_bytes).c_str(), ev.memory.oom ? "  OUT OF MEMORY" : "");
  os << line;
  if (ev.memory.per_stage.size() > 1) {
    os << "  per stage  ";
    for (const auto& st : ev.memory.per_stage) os << format_bytes(st.peak_bytes) << "  ";
    os << "\n";
  }
}

void print_what_if(std::ostream& os, const Scenario& s, const WhatIf& w) {
  const Evaluation& b = w.base;
  char line[256];
  os << s.name << ": " << s.model.name << " on " << b.nodes << " x " << s.cluster.gpus_per_node << " " << s.hardware.name
     << " (" << b.gpus << " GPUs)\n" << profile_note(s.hardware);
  if (b.nodes > 1) os << "network " << describe_network(s) << "\n";
  os << "layout  " << describe(b.layout) << "\n";
  std::snprintf(line, sizeof line, "step    %s   %.0f tokens/s as profiled\n", format_seconds(b.step.step_time_s).c_str(), b.tokens_per_s);
  os << line;
  if (b.memory.oom)
    os << "        (out of memory: the stage with the highest peak needs " << format_bytes(b.memory.peak().peak_bytes) << " of "
       << format_bytes(b.memory.device_bytes) << "; the steps below are as if it fit)\n";
  os << "\n";
  std::snprintf(line, sizeof line, "%gx", w.factor);
  const std::string f = line;
  std::snprintf(line, sizeof line, "  %-31s %20s %20s\n", "one part, the rest as profiled", (f + " faster").c_str(), (f + " slower").c_str());
  os << line;
  const double base = b.step.step_time_s;
  auto change = [&](const Evaluation& ev) {
    char cell[64];
    std::snprintf(cell, sizeof cell, "%9s %+7.1f%%", format_seconds(ev.step.step_time_s).c_str(), 100.0 * (ev.step.step_time_s / base - 1));
    return std::string(cell);
  };
  for (const WhatIfRow& r : w.rows) {
    std::snprintf(line, sizeof line, "  %-31s %20s %20s\n", part_description(r.part), change(r.faster).c_str(), change(r.slower).c_str());
    os << line;
  }
  // The part that sets the step, and the runner-up, by what a faster one saves.
  const WhatIfRow* first = nullptr;
  const WhatIfRow* second = nullptr;
  for (const WhatIfRow& r : w.rows)
    if (r.part == w.sets_the_step) first = &r;
  for (const WhatIfRow& r : w.rows)
    if (&r != first && (!second || r.faster.step.step_time_s < second->faster.step.step_time_s)) second = &r;
  auto saved = [&](const WhatIfRow& r) { return 100.0 * (1 - r.faster.step.step_time_s / base); };
  if (first && saved(*first) > 0) {
    std::snprintf(line, sizeof line, "\n  %s sets this step: %s cuts it by %.1f%%", part_description(first->part), (f + " faster").c_str(),
                  saved(*first));
    os << line;
    if (second && saved(*second) > 0) {
      std::snprintf(line, sizeof line, "; the next, %s, by %.1f%%", part_description(second->part), saved(*second));
      os << line;
    } else if (second) {
      os << "; no other part does";
    }
    os << ".\n";
  } else {
    os << "\n  no part of the hardware made faster shortens this step.\n";
  }
  // A table of the layout under other settings of the network, each against the step as it is.
  auto setting_table = [&](const char* heading, const std::vector<SettingRow>& rows) {
    if (rows.empty()) return;
    std::snprintf(line, sizeof line, "\n  %-48s %9s %8s\n", heading, "step", "change");
    os << line;
    for (const SettingRow& r : rows) {
      std::snprintf(line, sizeof line, "  %-48s %9s %+7.1f%%\n", r.description.c_str(), format_seconds(r.eval.step.step_time_s).c_str(),
                    change_pct(r.eval.step.step_time_s, base));
      os << line;
    }
  };
  setting_table("an NCCL setting, the hardware as profiled", w.settings);
  const int per_leaf = network_for(s, w.base.nodes).shape.nodes_per_leaf();
  const bool rails = s.cluster.network.fabric == "rail-optimized";
  const std::string one_leaf = one_leaf_note(s, w.base.nodes);
  if (!one_leaf.empty()) os << "\n  " << one_leaf << ".\n";
  char heading[96];
  std::snprintf(heading, sizeof heading, "%s uplinks now %g:1 (%d nodes a %s)", rails ? "rail" : "leaf", s.cluster.network.oversubscription,
                per_leaf, rails ? "rail group" : "leaf");
  setting_table(heading, w.fabric);
  if (!w.fabric_left_out.empty()) {
    os << "  not priced:";
    for (std::size_t i = 0; i < w.fabric_left_out.size(); ++i) os << (i ? "; " : " ") << w.fabric_left_out[i];
    os << " (" << every_gpu_reason(w.fabric_left_out_because) << ")\n";
  }
}

void print_what_if_search(std::ostream& os, const Scenario& s, const WhatIfSearch& w) {
  const Evaluation& b = w.kept.base;
  char line[320];
  os << s.name << ": " << s.model.name << " on " << w.nodes << " x " << s.cluster.gpus_per_node << " " << s.hardware.name << " ("
     << b.gpus << " GPUs), the search space searched again with each part of the hardware changed\n"
     << profile_note(s.hardware);
  if (w.nodes > 1) os << "network " << describe_network(s) << "\n";
  os << w.layouts << " layouts, " << w.fit << " fit in memory; ranked by " << s.search.objective << "\n";
  std::snprintf(line, sizeof line, "as profiled: %s   %s   %.0f tokens/s\n", describe_short(b.layout).c_str(),
                format_seconds(b.step.step_time_s).c_str(), b.tokens_per_s);
  os << line;
  std::snprintf(line, sizeof line, "%gx", w.kept.factor);
  const std::string f = line;
  auto pct = [&](const Evaluation& ev) { return 100.0 * (ev.tokens_per_s / b.tokens_per_s - 1); };
  for (int side = 0; side < 2; ++side) {
    std::snprintf(line, sizeof line, "\n  %-31s %-46s %9s %11s %8s %12s\n", ("one part " + f + (side ? " slower" : " faster")).c_str(),
                  "best layout then", "step", "tokens/s", "vs now", "winner kept");
    os << line;
    for (std::size_t i = 0; i < w.rows.size(); ++i) {
      const Evaluation& ev = side ? w.rows[i].slower : w.rows[i].faster;
      const Evaluation& kept = side ? w.kept.rows[i].slower : w.kept.rows[i].faster;
      const bool same = describe(ev.layout) == describe(b.layout);
      std::snprintf(line, sizeof line, "  %-31s %-46s %9s %11.0f %+7.1f%% %+11.1f%%\n", part_description(w.rows[i].part),
                    same ? "the same" : describe_short(ev.layout).c_str(), format_seconds(ev.step.step_time_s).c_str(), ev.tokens_per_s,
                    pct(ev), pct(kept));
      os << line;
    }
  }
  // The part worth most when made faster, with the layout searched again; and every part whose
  // change of speed changes the winner.
  const WhatIfSearchRow* top = nullptr;
  for (const WhatIfSearchRow& r : w.rows)
    if (!top || r.faster.tokens_per_s > top->faster.tokens_per_s) top = &r;
  if (top && top->faster.tokens_per_s > b.tokens_per_s) {
    const std::size_t i = static_cast<std::size_t>(top - w.rows.data());
    std::snprintf(line, sizeof line, "\n  %s %s faster is worth the most: %+.1f%% tokens/s", part_description(top->part), f.c_str(),
                  pct(top->faster));
    os << line;
    if (describe(top->faster.layout) != describe(b.layout)) {
      std::snprintf(line, sizeof line, " with %s, %+.1f%% keeping today's winner", describe_short(top->faster.layout).c_str(),
                    pct(w.kept.rows[i].faster));
      os << line;
    } else {
      os << ", with today's winner";
    }
    os << ".\n";
  } else {
    os << "\n  no part of the hardware made faster raises the best throughput.\n";
  }
  std::vector<std::string> changed;
  for (const WhatIfSearchRow& r : w.rows) {
    const bool f_changed = describe(r.faster.layout) != describe(b.layout), s_changed = describe(r.slower.layout) != describe(b.layout);
    if (f_changed || s_changed)
      changed.push_back(std::string(part_description(r.part)) + (f_changed && s_changed ? " faster or slower" : f_changed ? " faster" : " slower"));
  }
  if (changed.empty()) {
    os << "  today's winner stays the best layout whichever part changes.\n";
  } else {
    os << "  the best layout changes with ";
    for (std::size_t i = 0; i < changed.size(); ++i) os << (i == 0 ? "" : i + 1 == changed.size() ? " and " : ", ") << changed[i];
    os << ".\n";
  }
}

}  // namespace trainsim
