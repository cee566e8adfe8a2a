#include "hardware_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "input_error.h"
#include "layout_search.h"
#include "planner_commands.h"
#include "result_json.h"
#include "text_report.h"

namespace trainsim {

using nlohmann::json;

namespace {

// The option's node counts: the search's where it names some, else the cluster's.
std::vector<int> option_nodes(const Scenario& s) {
  std::vector<int> n = s.has_search && !s.search.nodes.empty() ? s.search.nodes : s.cluster.nodes;
  std::sort(n.begin(), n.end());
  n.erase(std::unique(n.begin(), n.end()), n.end());
  return n;
}

ComparedOption evaluate_option(const Alternative& a, int threads) {
  const Scenario& s = *a.scenario;
  ComparedOption o;
  o.name = a.name;
  o.scenario = &s;
  const std::vector<int> nodes = option_nodes(s);
  if (s.has_search) {
    const std::vector<Candidate> cands = enumerate_layouts(s);
    SearchOptions so;
    so.threads = threads;
    so.keep = 1;  // the best of each node count is what an option is compared on
    const SearchResult r = cands.empty() ? SearchResult{} : search_layouts(s, cands, so);
    o.evaluated = r.evaluated;
    for (const Evaluation* ev : best_per_size(r.ranked)) o.best.push_back(*ev);
  } else {
    for (int n : nodes) {
      // Checked for every node count when the option's scenario was read.
      const Layout l = resolve_layout(s, s.layout, s.layout_dp_given && n == s.cluster.nodes.front(), n);
      ++o.evaluated;
      Evaluation ev = evaluate(s, l, n, EvalOptions{});
      if (!ev.memory.oom) o.best.push_back(std::move(ev));
    }
  }
  std::sort(o.best.begin(), o.best.end(), [](const Evaluation& x, const Evaluation& y) { return x.nodes < y.nodes; });
  for (int n : nodes) {
    bool found = false;
    for (const Evaluation& ev : o.best) found |= ev.nodes == n;
    if (!found) o.no_fit.push_back(n);
  }
  return o;
}

// Larger is better; NaN where the pick does not apply to this option and size.
template <class Score>
ComparedPick best_pick(const std::vector<ComparedOption>& options, Score score) {
  ComparedPick p;
  double best = -INFINITY;
  for (std::size_t i = 0; i < options.size(); ++i)
    for (std::size_t k = 0; k < options[i].best.size(); ++k) {
      const double v = score(*options[i].scenario, options[i].best[k]);
      if (std::isnan(v) || !(v > best)) continue;
      best = v;
      p.option = static_cast<int>(i);
      p.size = static_cast<int>(k);
    }
  return p;
}

std::string money(double usd) {
  std::string m("$");
  m.append(format_count(usd));
  return m;
}

}  // namespace

double tokens_per_dollar(const Scenario& option, const Evaluation& ev) {
  if (!(option.cost.gpu_hour_usd > 0) || !ev.simulated) return 0;
  return ev.tokens_per_s * goodput(ev) * 3600.0 / (ev.gpus * option.cost.gpu_hour_usd);
}

Comparison compare_hardware(const Scenario& s, int threads) {
  if (s.compare.empty()) throw InputError(s.file + ": compare", "the scenario has no \"compare\" block");
  Comparison c;
  for (const Alternative& a : s.compare) c.options.push_back(evaluate_option(a, threads));
  c.priced = true;
  for (const ComparedOption& o : c.options) c.priced &= o.scenario->cost.gpu_hour_usd > 0;
  const bool priced = c.priced;
  if (s.training.tokens_total > 0) {
    // A job that never finishes (goodput 0) has an infinite time to train: it qualifies for nothing.
    // A size over the site's power budget cannot be installed: it qualifies for nothing either.
    c.fastest = best_pick(c.options, [](const Scenario&, const Evaluation& ev) -> double {
      return std::isfinite(ev.time_to_train_s) && !ev.over_power_budget ? -ev.time_to_train_s : std::nan("");
    });
    auto cost = [priced](const Scenario&, const Evaluation& ev) -> double {
      if (!std::isfinite(ev.time_to_train_s) || ev.over_power_budget) return std::nan("");
      return priced ? -ev.cost_usd : -ev.time_to_train_s / 3600.0 * ev.gpus;
    };
    c.cheapest = best_pick(c.options, cost);
    if (s.training.deadline_days > 0)
      c.cheapest_in_deadline = best_pick(c.options, [&](const Scenario& o, const Evaluation& ev) -> double {
        return meets_deadline(o, ev) ? cost(o, ev) : std::nan("");
      });
  } else {
    c.fastest = best_pick(c.options, [](const Scenario&, const Evaluation& ev) {
      return ev.over_power_budget ? std::nan("") : ev.tokens_per_s;
    });
    c.cheapest = best_pick(c.options, [priced](const Scenario& o, const Evaluation& ev) {
      if (ev.over_power_budget) return std::nan("");
      return priced ? tokens_per_dollar(o, ev) : ev.tokens_per_s * goodput(ev) * 3600.0 / ev.gpus;
    });
  }
  return c;
}

int run_compare(const PlannerOptions& o, std::ostream& out) {
  const Scenario s = load_scenario(o.scenario, o.profile_dir);
  if (s.compare.empty()) throw InputError(s.file + ": compare", "the scenario has no \"compare\" block");
  const Comparison c = compare_hardware(s, o.threads);
  if (o.sharding.rank != 0) return 0;
  const bool to_train = s.training.tokens_total > 0;
  auto pick_json = [&](const ComparedPick& p) -> json {
    if (p.option < 0) return nullptr;
    const ComparedOption& opt = c.options[p.option];
    return json{{"name", opt.name}, {"nodes", opt.best[p.size].nodes}};
  };
  if (o.json) {
    json alts = json::array();
    for (const ComparedOption& opt : c.options) {
      const Scenario& a = *opt.scenario;
      json sizes = json::array();
      for (const Evaluation& ev : opt.best) {
        json r = result_to_json(a, ev);
        if (a.cost.gpu_hour_usd > 0) r["tokens_per_usd"] = tokens_per_dollar(a, ev);
        sizes.push_back(r);
      }
      json j{{"name", opt.name}, {"hardware", a.hardware_name}, {"hardware_profile", a.hardware.provenance.source},
             {"gpus_per_node", a.cluster.gpus_per_node},
             {"best_per_size", sizes}, {"no_layout_fits_nodes", opt.no_fit}, {"evaluated", opt.evaluated}};
      if (a.cost.gpu_hour_usd > 0) j["gpu_hour_usd"] = a.cost.gpu_hour_usd;
      alts.push_back(j);
    }
    json doc{{"scenario", s.name}, {"objective", s.search.objective}, {"alternatives", alts}};
    doc["compared_by"] = c.priced ? "cost_usd" : "gpu_hours";
    if (to_train) {
      doc["fastest_to_train"] = pick_json(c.fastest);
      doc["cheapest_to_train"] = pick_json(c.cheapest);
      if (s.training.deadline_days > 0) doc["cheapest_within_deadline"] = pick_json(c.cheapest_in_deadline);
    } else {
      doc["highest_throughput"] = pick_json(c.fastest);
      doc["most_tokens_per_unit_cost"] = pick_json(c.cheapest);
    }
    out << doc.dump(2) << "\n";
    return 0;
  }

  char line[400];
  out << s.name << ": " << s.model.name << " on " << c.options.size() << " hardware options, ";
  if (to_train) {
    out << "training " << s.training.tokens_total << " tokens";
    if (s.training.deadline_days > 0) out << " within " << s.training.deadline_days << " days";
  } else {
    out << "per step";
  }
  out << "\n" << (s.has_search ? "the best layout of the search space at each size (objective " + s.search.objective + ")"
                               : std::string("the scenario's layout at each size"))
      << (s.reliability.given && to_train ? ", failures and checkpoints included" : "") << "\n\n";
  std::snprintf(line, sizeof line, "%-12s %8s %5s %6s  %-44s %9s %11s %6s", "hardware", "$/GPU-h", "nodes", "GPUs", "layout", "step",
                "tokens/s", "MFU");
  out << line;
  bool powered = false;  // some option's profile gives its node power
  for (const ComparedOption& opt : c.options) powered |= opt.scenario->hardware.node_max_kW > 0;
  if (to_train) out << "  time to train    GPU-hours         cost" << (powered ? "      power     energy" : "");
  else out << "  tokens per $";
  out << "\n";
  for (const ComparedOption& opt : c.options) {
    const Scenario& a = *opt.scenario;
    char price_col[16];
    if (a.cost.gpu_hour_usd > 0) std::snprintf(price_col, sizeof price_col, "%.2f", a.cost.gpu_hour_usd);
    else std::snprintf(price_col, sizeof price_col, "-");
    bool first = true;
    for (const Evaluation& ev : opt.best) {
      std::snprintf(line, sizeof line, "%-12s %8s %5d %6d  %-44s %9s %11.0f %5.1f%%", first ? opt.name.c_str() : "", first ? price_col : "",
                    ev.nodes, ev.gpus, describe_short(ev.layout).c_str(), format_seconds(ev.step.step_time_s).c_str(), ev.tokens_per_s,
                    100 * ev.mfu);
      out << line;
      if (to_train) {
        std::snprintf(line, sizeof line, "  %13s %12s %12s", format_seconds(ev.time_to_train_s).c_str(),
                      format_count(ev.time_to_train_s / 3600.0 * ev.gpus).c_str(),
                      a.cost.gpu_hour_usd > 0 ? money(ev.cost_usd).c_str() : "-");
        out << line;
        if (powered) {
          const bool has = ev.facility_kW > 0;
          std::snprintf(line, sizeof line, " %10s %10s%s", has ? format_power(ev.facility_kW).c_str() : "-",
                        has ? format_energy(ev.energy_kWh).c_str() : "-", ev.over_power_budget ? "  over the power budget" : "");
        } else {
          line[0] = '\0';
        }
      } else {
        std::snprintf(line, sizeof line, "  %12s", a.cost.gpu_hour_usd > 0 ? format_count(tokens_per_dollar(a, ev)).c_str() : "-");
      }
      out << line << "\n";
      first = false;
    }
    for (int n : opt.no_fit) {
      std::snprintf(line, sizeof line, "%-12s %8s %5d %6d  %s\n", first ? opt.name.c_str() : "", first ? price_col : "", n,
                    n * a.cluster.gpus_per_node, s.has_search ? "no layout of the search space fits" : "the layout does not fit in memory");
      out << line;
      first = false;
    }
  }
  out << "\n";
  auto describe_pick = [&](const ComparedPick& p) {
    const ComparedOption& opt = c.options[p.option];
    const Evaluation& ev = opt.best[p.size];
    std::string d = opt.name;
    d.append(" on ").append(format_nodes(ev.nodes)).append(" (");
    if (to_train) {
      d.append(format_seconds(ev.time_to_train_s)).append(", ");
      if (c.priced) d.append(money(ev.cost_usd));
      else d.append(format_count(ev.time_to_train_s / 3600.0 * ev.gpus)).append(" GPU-hours");
    } else {
      d.append(format_count(ev.tokens_per_s)).append(" tokens/s, ");
      if (c.priced) d.append(format_count(tokens_per_dollar(*opt.scenario, ev))).append(" tokens per $");
      else d.append(format_count(ev.tokens_per_s * goodput(ev) * 3600.0 / ev.gpus)).append(" tokens per GPU-hour");
    }
    return d.append(")");
  };
  const char* least = c.priced ? "cheapest" : "fewest GPU-hours";
  if (to_train) {
    if (c.fastest.option >= 0) out << "fastest to train: " << describe_pick(c.fastest) << "\n";
    else out << "no option finishes training at the sizes compared\n";
    if (c.cheapest.option >= 0) out << least << " to train: " << describe_pick(c.cheapest) << "\n";
    if (s.training.deadline_days > 0) {
      if (c.cheapest_in_deadline.option >= 0)
        out << least << " within the " << s.training.deadline_days << "-day deadline: " << describe_pick(c.cheapest_in_deadline) << "\n";
      else out << "no option trains within the " << s.training.deadline_days << "-day deadline at the sizes compared\n";
    }
  } else {
    if (c.fastest.option >= 0) out << "highest throughput: " << describe_pick(c.fastest) << "\n";
    if (c.cheapest.option >= 0) out << (c.priced ? "most tokens per dollar: " : "most tokens per GPU-hour: ") << describe_pick(c.cheapest) << "\n";
  }
  if (!c.priced) out << "not every option has a price (gpu_hour_usd): GPU-hours are compared instead of money\n";
  std::vector<std::string> noted;  // one note a profile, however many options use it
  for (const ComparedOption& opt : c.options) {
    const HardwareProfile& hp = opt.scenario->hardware;
    if (std::find(noted.begin(), noted.end(), hp.name) != noted.end()) continue;
    noted.push_back(hp.name);
    out << profile_note(hp);
  }
  if (powered && to_train)
    out << "power: the nodes' maximum input power (datasheet)" << (s.cost.pue > 1 ? " times the site's PUE" : "")
        << ", an upper bound on the draw; energy: that power for the time to train\n";
  if (s.cluster.power_budget_kW > 0)
    out << "sizes over the " << format_power(s.cluster.power_budget_kW) << " power budget are not picked\n";
  return 0;
}

}  // namespace trainsim
