#include "html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "critical_path.h"
#include "evaluation.h"
#include "hardware_compare.h"
#include "layout_search.h"
#include "text_report.h"
#include "what_if.h"

namespace trainsim {

namespace {

std::string esc(const std::string& in) {
  std::string o;
  for (char c : in) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

const char* kColors[sim::kCategories] = {"#4e79a7", "#a0cbe8", "#f28e2b", "#e15759", "#b07aa1", "#bab0ac", "#59a14f", "#edc948"};
const char* kMemColors[6] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#999999"};
const char* kOptionColors[8] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7"};

// "$1.51M", "$820k": for axes.
std::string usd_short(double usd) {
  if (usd >= 1e9) return fmt("$%.3gB", usd / 1e9);
  if (usd >= 1e6) return fmt("$%.3gM", usd / 1e6);
  if (usd >= 1e3) return fmt("$%.3gk", usd / 1e3);
  return fmt("$%.3g", usd);
}


// Horizontal stacked bars of the exposed breakdown, one per layout.
std::string breakdown_chart(const std::vector<Evaluation>& evs) {
  const int W = 860, row = 26, left = 40, top = 10;
  double tmax = 0;
  for (const auto& e : evs) tmax = std::max(tmax, e.step.step_time_s);
  std::ostringstream o;
  const int H = top + row * static_cast<int>(evs.size()) + 40;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' role='img' aria-label='step time breakdown'>";
  for (std::size_t i = 0; i < evs.size(); ++i) {
    double x = left;
    const int y = top + row * static_cast<int>(i);
    o << "<text x='4' y='" << y + 16 << "' font-size='12'>#" << i + 1 << "</text>";
    for (int c = 0; c < sim::kCategories; ++c) {
      const double w = (W - left - 80) * evs[i].step.breakdown_s[c] / tmax;
      if (w <= 0) continue;
      o << "<rect x='" << x << "' y='" << y << "' width='" << w << "' height='" << row - 6 << "' fill='" << kColors[c]
        << "'><title>" << sim::category_name(c) << " " << format_seconds(evs[i].step.breakdown_s[c]) << "</title></rect>";
      x += w;
    }
    o << "<text x='" << x + 4 << "' y='" << y + 16 << "' font-size='11'>" << format_seconds(evs[i].step.step_time_s) << "</text>";
  }
  int lx = left;
  const int ly = top + row * static_cast<int>(evs.size()) + 14;
  for (int c = 0; c < sim::kCategories; ++c) {
    o << "<rect x='" << lx << "' y='" << ly << "' width='12' height='12' fill='" << kColors[c] << "'/><text x='" << lx + 16 << "' y='"
      << ly + 11 << "' font-size='11'>" << sim::category_name(c) << "</text>";
    lx += 100;
  }
  o << "</svg>";
  return o.str();
}

// Bars of the peak memory per pipeline stage, with the device's memory as a line.
std::string memory_chart(const Evaluation& ev) {
  const auto& st = ev.memory.per_stage;
  const int W = 860, H = 220, left = 60, bottom = 190;
  double vmax = ev.memory.device_bytes;
  for (const auto& s : st) vmax = std::max(vmax, s.peak_bytes);
  vmax *= 1.1;
  // A pipeline of a few stages gets wider bars, each part's size written on it where it is tall
  // enough to hold the text.
  const double bw = std::min(st.size() <= 4 ? 130.0 : 60.0, (W - left - 20.0) / st.size());
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' role='img' aria-label='memory per stage'>";
  for (std::size_t i = 0; i < st.size(); ++i) {
    const double parts[6] = {st[i].params_bytes, st[i].grads_bytes, st[i].optimizer_bytes, st[i].activations_bytes,
                             st[i].buffers_bytes, st[i].workspace_bytes};
    const char* names[6] = {"parameters", "gradients", "optimizer", "activations", "buffers", "runtime + fragmentation"};
    double y = bottom;
    for (int p = 0; p < 6; ++p) {
      const double h = (bottom - 10) * parts[p] / vmax;
      y -= h;
      o << "<rect x='" << left + i * bw + 2 << "' y='" << y << "' width='" << bw - 4 << "' height='" << h << "' fill='"
        << kMemColors[p] << "'><title>stage " << i << " " << names[p] << " " << format_bytes(parts[p]) << "</title></rect>";
      if (bw >= 100 && h >= 13)
        o << "<text x='" << left + i * bw + bw / 2 << "' y='" << y + h / 2 + 4 << "' font-size='10' text-anchor='middle' fill='#fff'>"
          << format_bytes(parts[p]) << "</text>";
    }
    o << "<text x='" << left + i * bw + 4 << "' y='" << bottom + 14 << "' font-size='10'>s" << i << "</text>";
    // Each stage's peak above its bar, where the bars are wide enough to hold it.
    if (bw >= 40)
      o << "<text x='" << left + i * bw + bw / 2 << "' y='" << y - 4 << "' font-size='10' text-anchor='middle'>"
        << format_bytes(st[i].peak_bytes) << "</text>";
  }
  const double dy = bottom - (bottom - 10) * ev.memory.device_bytes / vmax;
  o << "<line x1='" << left << "' x2='" << W - 10 << "' y1='" << dy << "' y2='" << dy << "' stroke='#d62728' stroke-dasharray='6 3'/>"
    << "<text x='" << left + st.size() * bw + 8 << "' y='" << dy - 4 << "' font-size='11' fill='#d62728'>device memory " << format_bytes(ev.memory.device_bytes)
    << "</text><text x='4' y='20' font-size='11'>" << format_bytes(vmax / 1.1) << "</text>";
  const char* names[6] = {"parameters", "gradients", "optimizer", "activations", "buffers", "runtime + fragmentation"};
  for (int p = 0; p < 6; ++p)
    o << "<rect x='" << W - 190 << "' y='" << 30 + 16 * p << "' width='12' height='12' fill='" << kMemColors[p] << "'/><text x='" << W - 174
      << "' y='" << 41 + 16 * p << "' font-size='11'>" << names[p] << "</text>";
  o << "</svg>";
  return o.str();
}

// Tokens/s against GPU count on a log axis, with gridlines, ideal linear scaling from the smallest
// size, and each size's scaling efficiency against the smallest written above its point. With
// `name_layouts` (a different layout may run at each size) each size's degrees go under its count.
std::string scaling_chart(const std::vector<Evaluation>& evs, bool name_layouts) {
  const int W = 860, H = name_layouts ? 284 : 270, left = 80, bottom = 225, top = 24;
  double gmax = 0, tmax = 0, gmin = 1e300;
  for (const auto& e : evs) {
    gmax = std::max<double>(gmax, e.gpus);
    gmin = std::min<double>(gmin, e.gpus);
    tmax = std::max(tmax, e.tokens_per_s);
  }
  const double per_gpu0 = evs.front().tokens_per_s / evs.front().gpus;
  const double ideal_max = per_gpu0 * gmax;
  tmax = std::max(tmax, ideal_max) * 1.08;
  auto X = [&](double g) { return left + (W - left - 40) * std::log2(g / gmin) / std::max(1.0, std::log2(gmax / gmin)); };
  auto Y = [&](double t) { return bottom - (bottom - top) * t / tmax; };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' role='img' aria-label='scaling'>";
  // Gridlines at a round step (1, 2 or 5 times a power of ten) giving three to five of them, labelled
  // 50k, 100k, 1.5M.
  const double raw = tmax / 1.08 / 4, decade = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = decade * (raw <= decade ? 1 : raw <= 2 * decade ? 2 : raw <= 5 * decade ? 5 : 10);
  for (double t = 0; step > 0 && t <= tmax; t += step) {  // none when nothing ran (tmax 0)
    const std::string label = t >= 1e6 ? fmt("%gM", t / 1e6) : t >= 1e3 ? fmt("%gk", t / 1e3) : fmt("%g", t);
    o << "<line x1='" << left << "' y1='" << Y(t) << "' x2='" << W - 30 << "' y2='" << Y(t) << "' stroke='#eee'/><text x='" << left - 6
      << "' y='" << Y(t) + 4 << "' font-size='11' text-anchor='end'>" << label << "</text>";
  }
  o << "<line x1='" << X(evs.front().gpus) << "' y1='" << Y(evs.front().tokens_per_s) << "' x2='" << X(gmax) << "' y2='" << Y(ideal_max)
    << "' stroke='#bbb' stroke-dasharray='4 3'/><polyline fill='none' stroke='#4e79a7' stroke-width='2' points='";
  for (const auto& e : evs) o << X(e.gpus) << "," << Y(e.tokens_per_s) << " ";
  o << "'/>";
  bool any_oom = false;
  for (const auto& e : evs) {
    const double eff = e.tokens_per_s / e.gpus / per_gpu0;
    // A size where the layout does not fit in memory: a hollow red point, its step shown all the same.
    const bool oom = e.memory.oom;
    any_oom |= oom;
    o << "<circle cx='" << X(e.gpus) << "' cy='" << Y(e.tokens_per_s) << "' r='4' "
      << (oom ? "fill='#fff' stroke='#c0392b' stroke-width='2'" : "fill='#4e79a7'") << "><title>" << e.gpus << " GPUs: "
      << fmt("%.0f", e.tokens_per_s) << " tokens/s" << (oom ? ", out of memory" : "")
      << (name_layouts ? ", " + esc(describe_short(e.layout)) : std::string()) << "</title></circle><text x='" << X(e.gpus)
      << "' y='" << Y(e.tokens_per_s) - 9 << "' font-size='11' text-anchor='middle'" << (oom ? " fill='#c0392b'" : "") << ">"
      << fmt("%.0f%%", 100 * eff) << (oom ? " OOM" : "") << "</text><text x='" << X(e.gpus) << "' y='" << bottom + 16
      << "' font-size='11' text-anchor='middle'>" << e.gpus << "</text>";
    if (name_layouts) {
      const Layout& l = e.layout;
      o << "<text x='" << X(e.gpus) << "' y='" << bottom + 30 << "' font-size='10' fill='#666' text-anchor='middle'>tp" << l.tp << " pp" << l.pp
        << " dp" << l.dp << (l.vpp > 1 ? " v" + std::to_string(l.vpp) : std::string()) << "</text>";
    }
  }
  o << "<text x='4' y='14' font-size='11'>tokens/s</text><text x='" << W / 2 << "' y='" << H - 6
    << "' font-size='11' text-anchor='middle'>GPUs (log scale); dashed: linear scaling; % : scaling efficiency against " << evs.front().gpus
    << " GPUs" << (any_oom ? "; OOM: out of memory at that size" : "") << "</text></svg>";
  return o.str();
}

// One step of a layout: a row per simulated GPU (one per pipeline stage) and stream. Tasks narrower
// than kFine pixels that touch at the chart's resolution are drawn as one bar, coloured by the
// category that takes most of its time and titled with its task count: a step of thousands of
// passes stays a page of a few hundred bars, and looks the same. Backward compute gets a darker
// shade of forward's, so that a stage's alternation shows.
std::string timeline_chart(const sim::StepResult& r) {
  constexpr int kBackward = sim::kCategories;  // backward compute, drawn apart from forward
  const char* shade[sim::kCategories + 1];
  for (int c = 0; c < sim::kCategories; ++c) shade[c] = kColors[c];
  shade[kBackward] = "#1f3b63";
  auto kind = [](const sim::TimelineEntry& e) {
    return e.category == sim::kCompute && !e.name.empty() && e.name[0] == 'B' ? kBackward : e.category;
  };
  // The critical path first (lane GPU -1), then each GPU's streams.
  std::vector<std::pair<int, int>> lanes;
  for (const auto& e : r.timeline)
    if (std::find(lanes.begin(), lanes.end(), std::make_pair(e.gpu, e.stream)) == lanes.end()) lanes.push_back({e.gpu, e.stream});
  if (!r.critical_path.empty()) lanes.push_back({-1, 0});
  std::sort(lanes.begin(), lanes.end());
  const int W = 860, row = 16, left = 120;
  const int legend_y = 6 + row * static_cast<int>(lanes.size());
  const int H = legend_y + 24;
  const double scale = (W - left - 10) / r.step_time_s;
  constexpr double kFine = 2.0;
  static const char* stream_name[3] = {"compute", "dp/zero", "pp"};
  std::vector<std::vector<const sim::TimelineEntry*>> by_lane(lanes.size());
  for (const auto& e : r.timeline) {
    if (e.end_s <= e.start_s) continue;
    by_lane[std::find(lanes.begin(), lanes.end(), std::make_pair(e.gpu, e.stream)) - lanes.begin()].push_back(&e);
  }
  // Named for the GPU each ran on, for the bars' titles.
  std::vector<sim::TimelineEntry> path = r.critical_path;
  for (auto& e : path) {
    e.name += " (GPU " + std::to_string(e.gpu) + ")";
    by_lane[0].push_back(&e);
  }
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' role='img' aria-label='timeline'>";
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    o << "<text x='2' y='" << 12 + row * i << "' font-size='10'>";
    if (lanes[i].first < 0) o << "critical path";
    else o << "GPU " << lanes[i].first << " " << stream_name[lanes[i].second];
    o << "</text>";
  }
  for (std::size_t li = 0; li < lanes.size(); ++li) {
    auto& es = by_lane[li];
    std::stable_sort(es.begin(), es.end(), [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
    std::size_t k = 0;
    while (k < es.size()) {
      // One bar: this task, and while it and the next are fine and touch, the next.
      std::size_t end = k + 1;
      double x1 = es[k]->end_s * scale;
      while (end < es.size() && (es[end - 1]->end_s - es[end - 1]->start_s) * scale < kFine &&
             (es[end]->end_s - es[end]->start_s) * scale < kFine && es[end]->start_s * scale < x1 + 0.5) {
        x1 = std::max(x1, es[end]->end_s * scale);
        ++end;
      }
      double busy[sim::kCategories + 1] = {};
      for (std::size_t j = k; j < end; ++j) busy[kind(*es[j])] += es[j]->end_s - es[j]->start_s;
      const int cat = static_cast<int>(std::max_element(busy, busy + sim::kCategories + 1) - busy);
      const double x = left + es[k]->start_s * scale, w = std::max(0.5, left + x1 - x);
      o << "<rect x='" << x << "' y='" << 2 + row * li << "' width='" << w << "' height='" << row - 4 << "' fill='" << shade[cat]
        << "'><title>";
      if (end == k + 1) {
        const double took = es[k]->end_s - es[k]->start_s, contention = took - es[k]->uncontended_s;
        o << esc(es[k]->name) << " " << format_seconds(took);
        if (contention > 1e-3 * took) o << ", of which " << format_seconds(contention) << " contention (alone " << format_seconds(es[k]->uncontended_s) << ")";
      }
      else o << end - k << " tasks, " << esc(es[k]->name) << " to " << esc(es[end - 1]->name) << ", over " << format_seconds(x1 / scale - es[k]->start_s);
      o << "</title></rect>";
      k = end;
    }
  }
  static const char* legend[] = {"forward", "backward", "recompute", "tp_comm", "pp_comm", "dp_comm", "optimizer"};
  static const int legend_kind[] = {sim::kCompute, kBackward, sim::kRecompute, sim::kTpComm, sim::kPpComm, sim::kDpComm, sim::kOptimizer};
  for (int i = 0; i < 7; ++i)
    o << "<rect x='" << left + 100 * i << "' y='" << legend_y + 6 << "' width='12' height='12' fill='" << shade[legend_kind[i]]
      << "'/><text x='" << left + 100 * i + 16 << "' y='" << legend_y + 17 << "' font-size='11'>" << legend[i] << "</text>";
  o << "</svg>";
  return o.str();
}

// What the scenario's stragglers cost the step at each size, against every GPU and NIC at its
// nominal rate.
std::string straggler_table(const Scenario& s, const std::vector<Evaluation>& evs) {
  std::ostringstream o;
  const bool gpus = s.stragglers.speed_stdev > 0 || !s.stragglers.gpus.empty(), nics = !s.stragglers.nics.empty();
  o << "<h2>Stragglers</h2><table><tr><th>nodes</th><th>GPUs</th>";
  if (gpus) o << "<th>slowest GPU</th><th>its speed</th><th>GPUs under 95%</th>";
  if (nics) o << "<th>slow NICs</th>";
  o << "<th>step</th><th>at nominal speed</th><th>cost</th><th>upper bound</th></tr>";
  for (const Evaluation& ev : evs) {
    if (!ev.simulated) continue;
    const auto& st = ev.stragglers;
    o << "<tr><td>" << ev.nodes << (ev.memory.oom ? " <b style='color:#c0392b' title='the layout does not fit in memory here'>OOM</b>" : "")
      << "</td><td>" << ev.gpus << "</td>";
    if (gpus) o << "<td>" << st.slowest_gpu << "</td><td>" << fmt("%.1f%%", 100 * st.slowest_speed) << "</td><td>" << st.below_95 << "</td>";
    if (nics) o << "<td>" << st.slow_nics_here << "</td>";
    o << "<td>" << format_seconds(ev.step.step_time_s) << "</td><td>" << format_seconds(st.step_without_s) << "</td><td>"
      << fmt("%+.1f%%", 100 * (ev.step.step_time_s / st.step_without_s - 1)) << "</td><td>"
      << (st.step_upper_s > 0 ? fmt("%+.1f%%", 100 * (st.step_upper_s / st.step_without_s - 1)) : std::string("—")) << "</td></tr>";
  }
  o << "</table><p class='note'>The step is the slowest data-parallel replica's, each replica's pipeline simulated on its own "
       "(replicas meet only at the gradient reduction); the upper bound puts every stage at its slowest GPU and NIC of any "
       "replica (planner simulate --mode full places every GPU and NIC).</p>";
  return o.str();
}

// Time, GPU-hours and cost to train the scenario's tokens at each size, failures and checkpoints
// included where the scenario gives a `reliability` block. `whose` says which layout each row is,
// and `layouts` adds it as a column (the best at each size differs from size to size). A row whose
// layout does not fit in memory says so, and no size that does not fit meets the deadline.
std::string capacity_table(const Scenario& s, const std::vector<Evaluation>& evs, const std::string& whose, bool layouts) {
  std::ostringstream o;
  const bool rel = s.reliability.given;
  bool any_oom = false;
  for (const Evaluation& e : evs) any_oom |= e.memory.oom;
  o << "<h2>Training " << fmt("%.3g", s.training.tokens_total) << " tokens</h2><p class='note'>" << esc(whose)
    << ".</p><table><tr><th>nodes</th><th>GPUs</th>" << (layouts ? "<th class='l'>layout</th>" : "") << "<th>tokens/s</th>";
  if (rel) o << "<th>failure every</th><th>checkpoint every</th><th>goodput</th>";
  const bool power = s.hardware.node_max_kW > 0;
  o << "<th>time to train</th><th>GPU-hours</th>" << (s.cost.gpu_hour_usd > 0 ? "<th>cost</th>" : "")
    << (power ? "<th>power</th><th>energy</th>" : "") << (any_oom ? "<th class='l'>memory</th>" : "") << "</tr>";
  int smallest = 0;
  for (const Evaluation& e : evs) {
    const bool late = s.training.deadline_days > 0 && e.time_to_train_s > s.training.deadline_days * 86400.0;
    if (meets_deadline(s, e) && (smallest == 0 || e.nodes < smallest)) smallest = e.nodes;
    o << "<tr><td>" << e.nodes << "</td><td>" << e.gpus << "</td>";
    if (layouts) o << "<td class='l'>" << esc(describe_short(e.layout)) << "</td>";
    o << "<td>" << fmt("%.0f", e.tokens_per_s) << "</td>";
    if (rel)
      o << "<td>" << format_seconds(e.reliability.job_mtbf_s) << "</td><td>" << format_seconds(e.reliability.interval_s) << "</td><td>"
        << fmt("%.1f%%", 100 * e.reliability.goodput) << "</td>";
    o << "<td" << (late ? " style='color:#b00'" : "") << ">" << format_seconds(e.time_to_train_s) << "</td><td>"
      << format_count(e.time_to_train_s / 3600.0 * e.gpus) << "</td>";
    if (s.cost.gpu_hour_usd > 0) o << "<td>$" << format_count(e.cost_usd) << "</td>";
    if (power)
      o << "<td" << (e.over_power_budget ? " style='color:#b00'" : "") << ">" << format_power(e.facility_kW) << "</td><td>"
        << format_energy(e.energy_kWh) << "</td>";
    if (any_oom)
      o << "<td class='l'" << (e.memory.oom ? " style='color:#b00'>out of memory: " : ">") << format_bytes(e.memory.peak().peak_bytes)
        << " of " << format_bytes(e.memory.device_bytes) << "</td>";
    o << "</tr>";
  }
  o << "</table><p class='note'>";
  if (s.training.deadline_days > 0)
    o << (smallest > 0 ? "<b>Smallest size that meets the " + fmt("%g", s.training.deadline_days) + "-day deadline: " +
                             format_nodes(smallest) + (s.cluster.power_budget_kW > 0 ? ", within the power budget" : "") +
                             ".</b> "
                       : "<b>No size here meets the " + fmt("%g", s.training.deadline_days) + "-day deadline.</b> ");
  if (rel)
    o << "Any GPU or node failure stops the job, which restarts from its last checkpoint; checkpoints at Daly's optimum "
         "interval. ";
  if (s.training.deadline_days > 0) o << "In red: over the " << s.training.deadline_days << "-day deadline. ";
  if (power) o << "Power: the nodes' maximum input power (datasheet)" << (s.cost.pue > 1 ? " times the site's PUE" : "")
               << ", an upper bound on the draw; energy: that power for the time to train.";
  if (power && s.cluster.power_budget_kW > 0) o << " Power in red: over the site's " << format_power(s.cluster.power_budget_kW) << ".";
  o << "</p>";
  return o.str();
}

// Time to train against its cost, one series per hardware option (a point per size), with the
// deadline as a line: the chart a purchase is decided on.
std::string frontier_chart(const Scenario& s, const Comparison& c) {
  const int W = 860, H = 310, left = 90, bottom = 260, top = 30, right = 170;
  double tmin = INFINITY, tmax = 0, cmin = INFINITY, cmax = 0;
  for (const auto& opt : c.options)
    for (const auto& ev : opt.best) {
      if (!std::isfinite(ev.time_to_train_s)) continue;
      tmin = std::min(tmin, ev.time_to_train_s / 86400.0);
      tmax = std::max(tmax, ev.time_to_train_s / 86400.0);
      cmin = std::min(cmin, ev.cost_usd);
      cmax = std::max(cmax, ev.cost_usd);
    }
  if (!(tmax > 0) || !(cmax > 0)) return "";
  const double deadline = s.training.deadline_days;
  if (deadline > 0) tmin = std::min(tmin, deadline), tmax = std::max(tmax, deadline);
  // Days on a log axis (sizes double), cost on a linear one from just under the cheapest.
  const double lo = std::log(tmin * 0.9), hi = std::log(tmax * 1.1);
  const double c0 = cmin * 0.95, c1 = cmax * 1.05;
  auto X = [&](double days) { return left + (W - left - right) * (std::log(days) - lo) / (hi - lo); };
  auto Y = [&](double usd) { return bottom - (bottom - top) * (usd - c0) / (c1 - c0); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' role='img' aria-label='time and cost to train'>";
  for (int i = 0; i <= 4; ++i) {
    const double usd = c0 + (c1 - c0) * i / 4;
    o << "<line x1='" << left << "' y1='" << Y(usd) << "' x2='" << W - right << "' y2='" << Y(usd) << "' stroke='#eee'/><text x='" << left - 6
      << "' y='" << Y(usd) + 4 << "' font-size='11' text-anchor='end'>" << usd_short(usd) << "</text>";
  }
  // Day ticks at 1, 2, 5 times powers of ten inside the range.
  for (double decade = 1; decade <= 1e5; decade *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      const double d = m * decade;
      if (d < std::exp(lo) || d > std::exp(hi)) continue;
      o << "<line x1='" << X(d) << "' y1='" << top << "' x2='" << X(d) << "' y2='" << bottom << "' stroke='#eee'/><text x='" << X(d)
        << "' y='" << bottom + 14 << "' font-size='11' text-anchor='middle'>" << fmt("%g", d) << "</text>";
    }
  if (deadline > 0)
    o << "<line x1='" << X(deadline) << "' y1='" << top << "' x2='" << X(deadline) << "' y2='" << bottom
      << "' stroke='#d62728' stroke-dasharray='6 3'/><text x='" << X(deadline) + 4 << "' y='" << top + 10
      << "' font-size='11' fill='#d62728'>deadline " << fmt("%.0f", deadline) << " days</text>";
  for (std::size_t i = 0; i < c.options.size(); ++i) {
    const auto& opt = c.options[i];
    const char* colour = kOptionColors[i % 8];
    o << "<polyline fill='none' stroke='" << colour << "' stroke-width='2' points='";
    for (const auto& ev : opt.best)
      if (std::isfinite(ev.time_to_train_s)) o << X(ev.time_to_train_s / 86400.0) << "," << Y(ev.cost_usd) << " ";
    o << "'/>";
    for (const auto& ev : opt.best) {
      if (!std::isfinite(ev.time_to_train_s)) continue;
      const double x = X(ev.time_to_train_s / 86400.0), y = Y(ev.cost_usd);
      o << "<circle cx='" << x << "' cy='" << y << "' r='4' fill='" << colour << "'><title>" << esc(opt.name) << ", " << format_nodes(ev.nodes) << ": "
        << format_seconds(ev.time_to_train_s) << ", " << usd_short(ev.cost_usd) << "</title></circle><text x='" << x + 5 << "' y='"
        << y - 5 << "' font-size='10'>" << ev.nodes << "</text>";
    }
    o << "<rect x='" << W - right + 16 << "' y='" << top + 18 * i << "' width='12' height='12' fill='" << colour << "'/><text x='"
      << W - right + 32 << "' y='" << top + 18 * i + 11 << "' font-size='11'>" << esc(opt.name) << "</text>";
  }
  o << "<text x='" << (left + W - right) / 2 << "' y='" << H - 14 << "' font-size='11' text-anchor='middle'>days to train (log scale); "
    << "each point a cluster size, labelled with its node count</text><text x='4' y='12' font-size='11'>cost to train</text></svg>";
  return o.str();
}

// The scenario on each hardware option of its `compare` block: the best layout at each size, and
// which option trains fastest, cheapest, and cheapest within the deadline.
std::string comparison_section(const Scenario& s) {
  const Comparison c = compare_hardware(s, 0);
  const bool to_train = s.training.tokens_total > 0;
  const double deadline_s = s.training.deadline_days * 86400.0;
  std::ostringstream o;
  o << "<h2>Hardware options</h2><table><tr><th class='l'>hardware</th><th>$/GPU-h</th><th>nodes</th>"
    << "<th class='l'>best layout</th><th>step</th><th>tokens/s</th><th>MFU</th>";
  if (to_train) o << "<th>time to train</th><th>cost</th><th>energy</th>";
  o << "</tr>";
  for (const auto& opt : c.options) {
    const Scenario& a = *opt.scenario;
    bool first = true;
    auto head = [&] {
      o << "<tr><td class='l'>";
      if (first) o << esc(opt.name) << " <span class='note'>" << esc(a.hardware.provenance.source) << "</span>";
      o << "</td><td>" << (first && a.cost.gpu_hour_usd > 0 ? fmt("%.2f", a.cost.gpu_hour_usd) : "") << "</td>";
      first = false;
    };
    for (const auto& ev : opt.best) {
      head();
      const bool late = deadline_s > 0 && !(ev.time_to_train_s <= deadline_s);
      o << "<td>" << ev.nodes << " × " << a.cluster.gpus_per_node << "</td><td class='l'>" << esc(describe_short(ev.layout)) << "</td><td>"
        << format_seconds(ev.step.step_time_s) << "</td><td>" << fmt("%.0f", ev.tokens_per_s) << "</td><td>" << fmt("%.1f%%", 100 * ev.mfu)
        << "</td>";
      if (to_train)
        o << "<td" << (late ? " style='color:#b00'" : "") << ">" << format_seconds(ev.time_to_train_s) << "</td><td>"
          << (a.cost.gpu_hour_usd > 0 ? usd_short(ev.cost_usd) : std::string("—")) << "</td><td"
          << (ev.over_power_budget ? " style='color:#b00' title='over the site&#39;s power budget'" : "") << ">"
          << (ev.facility_kW > 0 ? format_energy(ev.energy_kWh) : std::string("—")) << "</td>";
      o << "</tr>";
    }
    for (int n : opt.no_fit) {
      head();
      o << "<td>" << n << " × " << a.cluster.gpus_per_node << "</td><td class='l' colspan='" << (to_train ? 7 : 4)
        << "'>" << (s.has_search ? "no layout of the search space fits" : "the layout does not fit in memory") << "</td></tr>";
    }
  }
  o << "</table>";
  auto pick = [&](const char* what, const ComparedPick& p) {
    if (p.option < 0) return;
    const auto& opt = c.options[p.option];
    const auto& ev = opt.best[p.size];
    o << "<li>" << what << ": <b>" << esc(opt.name) << " on " << format_nodes(ev.nodes) << "</b> (" << format_seconds(ev.time_to_train_s);
    if (c.priced) o << ", " << usd_short(ev.cost_usd);
    o << ")</li>";
  };
  if (to_train) {
    o << "<ul>";
    pick("fastest to train", c.fastest);
    pick(c.priced ? "cheapest to train" : "fewest GPU-hours to train", c.cheapest);
    if (deadline_s > 0) {
      if (c.cheapest_in_deadline.option >= 0)
        pick(c.priced ? "cheapest within the deadline" : "fewest GPU-hours within the deadline", c.cheapest_in_deadline);
      else
        o << "<li>no option trains within the " << s.training.deadline_days << "-day deadline at the sizes compared</li>";
    }
    o << "</ul>";
    if (c.priced) o << frontier_chart(s, c);
  }
  o << "<p class='note'>Each option is the scenario on that hardware: its search space at each of the option's node counts, "
       "the best layout at each size. Profiles marked <i>measured</i> were calibrated on that part; <i>derived</i> ones carry a "
       "calibrated part's efficiency to the datasheet's peaks and memory bandwidth by the rule their file states. In red: over the deadline";
  if (s.cluster.power_budget_kW > 0) o << " (time to train) or over the site's " << format_power(s.cluster.power_budget_kW) << " (energy)";
  o << ". Energy: the nodes' maximum input power" << (s.cost.pue > 1 ? " times the PUE" : "") << " for the time to train.</p>";
  return o.str();
}

// The winner's step with each part of the hardware twice as fast and half as fast: a bar for what
// the faster part saves, the part that saves most named.
std::string what_if_table(const Scenario& s, const Evaluation& best) {
  // The fabric's rows, on every GPU where symmetric mode does not apply only up to 512 GPUs (about a
  // second a row there; seconds each on thousands); `planner what-if` gives the others.
  const WhatIf w = what_if(s, best.layout, best.nodes, 2.0, "report", FabricRows{true, 512});
  const double base = w.base.step.step_time_s;
  std::ostringstream o;
  o << "<h2>What sets the winner's step</h2><p class='note'>Each part of the hardware twice as fast, then half as fast, the rest "
    << "as profiled. " << esc(part_description(w.sets_the_step)) << " sets this step.</p>"
    << "<table><tr><th class='l'>part</th><th>2× faster</th><th>change</th><th class='l'></th><th>2× slower</th><th>change</th></tr>";
  for (const WhatIfRow& r : w.rows) {
    const double saved = std::max(0.0, 1 - r.faster.step.step_time_s / base);
    const bool first = r.part == w.sets_the_step;
    o << "<tr><td class='l'>" << (first ? "<b>" : "") << esc(part_description(r.part)) << (first ? "</b>" : "") << "</td><td>"
      << format_seconds(r.faster.step.step_time_s) << "</td><td>" << fmt("%+.1f%%", 100 * (r.faster.step.step_time_s / base - 1))
      << "</td><td class='l'><div style='background:" << (first ? "#2a7" : "#9cb") << ";height:10px;width:" << fmt("%.0f", 200 * saved)
      << "px'></div></td><td>" << format_seconds(r.slower.step.step_time_s) << "</td><td>"
      << fmt("%+.1f%%", 100 * (r.slower.step.step_time_s / base - 1)) << "</td></tr>";
  }
  o << "</table>";
  if (!w.settings.empty()) {
    o << "<p class='note'>The same hardware with another NCCL setting (the scenario's <code>cluster.network</code>):</p>"
      << "<table><tr><th class='l'>setting</th><th>step</th><th>change</th></tr>";
    for (const SettingRow& r : w.settings)
      o << "<tr><td class='l'>" << esc(r.description) << "</td><td>" << format_seconds(r.eval.step.step_time_s) << "</td><td>"
        << fmt("%+.1f%%", 100 * (r.eval.step.step_time_s / base - 1)) << "</td></tr>";
    o << "</table>";
  }
  const NetworkSpec& net = s.cluster.network;
  const int per_leaf = network_for(s, w.base.nodes).shape.nodes_per_leaf();
  const bool rails = net.fabric == "rail-optimized";
  std::string one_leaf = one_leaf_note(s, w.base.nodes);
  if (!one_leaf.empty()) {
    one_leaf[0] = 'T';
    o << "<p class='note'>" << esc(one_leaf) << ", however oversubscribed.</p>";
  }
  if (!w.fabric.empty() || !w.fabric_left_out.empty()) {
    o << "<p class='note'>The same hardware with the " << (rails ? "rail" : "leaf") << " switches' uplinks to the spine "
      << "oversubscribed otherwise (the scenario's <code>cluster.network.oversubscription</code>, now " << fmt("%g", net.oversubscription)
      << ":1, " << format_nodes(per_leaf) << (rails ? " to a group of rail switches" : " to a leaf") << "):</p>";
    if (!w.fabric.empty()) {
      o << "<table><tr><th class='l'>fabric</th><th>step</th><th>change</th></tr>";
      for (const SettingRow& r : w.fabric)
        o << "<tr><td class='l'>" << esc(r.description) << "</td><td>" << format_seconds(r.eval.step.step_time_s) << "</td><td>"
          << fmt("%+.1f%%", 100 * (r.eval.step.step_time_s / base - 1)) << "</td></tr>";
      o << "</table>";
    }
    if (!w.fabric_left_out.empty()) {
      o << "<p class='note'>Not priced here: ";
      for (std::size_t i = 0; i < w.fabric_left_out.size(); ++i) o << (i ? "; " : "") << esc(w.fabric_left_out[i]);
      o << " (" << esc(every_gpu_reason(w.fabric_left_out_because)) << ": every GPU would be simulated); "
        << "<code>planner what-if</code> prices them.</p>";
    }
  }
  return o.str();
}

// The search space searched again at the winner's size with each part twice as fast and half as
// fast: the best layout then, against the winner kept.
std::string what_if_search_table(const Scenario& s, const Evaluation& best) {
  const WhatIfSearch w = what_if_search(s, best.nodes, 2.0, 0, "report");
  const Evaluation& b = w.kept.base;
  auto pct = [&](const Evaluation& ev) { return fmt("%+.1f%%", 100 * (ev.tokens_per_s / b.tokens_per_s - 1)); };
  std::ostringstream o;
  o << "<h2>Would another layout win on other hardware?</h2><p class='note'>The search space at " << format_nodes(w.nodes)
    << " searched again with each part twice as fast, then half as fast: the best layout then, its tokens/s against "
       "the winner's today, and the winner kept on that hardware.</p>"
    << "<table><tr><th class='l'>part</th><th class='l'></th><th class='l'>best layout then</th><th>tokens/s</th><th>winner kept</th></tr>";
  for (std::size_t i = 0; i < w.rows.size(); ++i)
    for (int side = 0; side < 2; ++side) {
      const Evaluation& ev = side ? w.rows[i].slower : w.rows[i].faster;
      const Evaluation& kept = side ? w.kept.rows[i].slower : w.kept.rows[i].faster;
      const bool same = describe(ev.layout) == describe(b.layout);
      o << "<tr>";
      if (side == 0) o << "<td class='l' rowspan='2'>" << esc(part_description(w.rows[i].part)) << "</td>";
      o << "<td class='l'>2× " << (side ? "slower" : "faster") << "</td><td class='l'>"
        << (same ? std::string("<span class='note'>the same</span>") : "<b>" + esc(describe_short(ev.layout)) + "</b>") << "</td><td>"
        << pct(ev) << "</td><td>" << pct(kept) << "</td></tr>";
    }
  o << "</table>";
  return o.str();
}

}  // namespace

std::string render_report(const Scenario& s, int top) {
  std::vector<Evaluation> ranked;
  std::size_t evaluated = 0, pruned = 0, bounded = 0;
  std::vector<Evaluation> best_sizes;  // the search's best layout at each of its node counts
  if (s.has_search) {
    SearchOptions so;
    so.keep = static_cast<std::size_t>(std::max(1, top));
    SearchResult r = search_layouts(s, enumerate_layouts(s), so);
    evaluated = r.evaluated;
    pruned = r.pruned_oom;
    bounded = r.pruned_bound;
    for (const Evaluation* e : best_per_size(r.ranked)) best_sizes.push_back(*e);
    ranked = std::move(r.ranked);
    if (static_cast<int>(ranked.size()) > top) ranked.resize(top);
  } else if (s.has_layout) {
    const int nodes = s.cluster.nodes.front();
    ranked.push_back(evaluate(s, resolve_layout(s, s.layout, s.layout_dp_given, nodes), nodes, EvalOptions{}));
  }
  std::ostringstream o;
  o << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>" << esc(s.name) << "</title><style>"
    << "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:980px;color:#222}h1{font-size:22px}"
    << "h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}table{border-collapse:collapse;font-size:12px}"
    << "td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}th{background:#f4f4f4}td.l,th.l{text-align:left}"
    << ".note{color:#666;font-size:12px}</style></head><body>";
  o << "<h1>" << esc(s.name) << "</h1><p>" << esc(s.description) << "</p>";
  o << "<table><tr><th class='l'>model</th><td class='l'>" << esc(s.model.name) << " (" << fmt("%.3g", static_cast<double>(count_params(s.model).total))
    << " parameters, " << s.model.layers << " layers, hidden " << s.model.hidden << ", seq " << s.model.seq_len << ")</td></tr>"
    << "<tr><th class='l'>hardware</th><td class='l'>" << esc(s.hardware.name) << " — profile " << esc(s.hardware.provenance.source)
    << (s.hardware.provenance.device.empty() ? "" : " on " + esc(s.hardware.provenance.device) + ", " + esc(s.hardware.provenance.date))
    << "</td></tr><tr><th class='l'>cluster</th><td class='l'>";
  for (int n : s.cluster.nodes) o << n << " ";
  o << "nodes × " << s.cluster.gpus_per_node << " GPUs, " << s.cluster.network.nics_per_node << " × " << s.cluster.network.nic_Gbps
    << " Gb/s NICs, " << esc(describe_fabric(s));
  if (s.cluster.network.nvls) o << ", NVLink SHARP on (NCCL_NVLS_ENABLE=1)";
  if (s.cluster.network.allreduce_algorithm != "auto") o << ", all-reduce forced to " << esc(s.cluster.network.allreduce_algorithm) << " (NCCL_ALGO=allreduce:" << esc(s.cluster.network.allreduce_algorithm) << ")";
  o << "</td></tr><tr><th class='l'>training</th><td class='l'>global batch "
    << s.training.global_batch << ", " << to_string(s.training.precision) << "</td></tr>";
  if (s.stragglers.given) {
    o << "<tr><th class='l'>stragglers</th><td class='l'>";
    if (s.stragglers.speed_stdev > 0) o << "GPU speeds spread " << fmt("%.1f", 100 * s.stragglers.speed_stdev) << "% (seed " << s.stragglers.seed << ")";
    bool first = s.stragglers.speed_stdev <= 0;
    for (const auto& g : s.stragglers.gpus) {
      o << (first ? "" : "; ") << "GPU " << g.gpu << " at " << fmt("%.0f", 100 * g.speed) << "%";
      first = false;
    }
    for (const auto& n : s.stragglers.nics) {
      o << (first ? "" : "; ") << "node " << n.node << " NIC " << n.nic << " at " << fmt("%.0f", 100 * n.speed) << "% of its rate";
      first = false;
    }
    o << " — every step below includes them</td></tr>";
  }
  o << "</table>";
  if (ranked.empty()) {
    o << "<p>Every layout is out of memory.</p></body></html>";
    return o.str();
  }
  o << "<h2>Top candidates</h2>";
  if (evaluated)
    o << "<p class='note'>" << evaluated << " layouts, " << pruned << " pruned by the memory model"
      << (bounded ? ", " + std::to_string(bounded) + " not simulated since their compute alone bounds their step too long to rank here" : "")
      << ".</p>";
  o << "<table><tr><th>#</th><th>nodes</th><th class='l'>layout</th><th>step</th><th>tokens/s</th><th>MFU</th><th>memory</th><th class='l'>why not first</th></tr>";
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const auto& e = ranked[i];
    o << "<tr><td>" << i + 1 << "</td><td>" << e.nodes << "</td><td class='l'>" << esc(describe_short(e.layout)) << "</td><td>"
      << format_seconds(e.step.step_time_s) << "</td><td>" << fmt("%.0f", e.tokens_per_s) << "</td><td>" << fmt("%.1f%%", 100 * e.mfu)
      << "</td><td>" << format_bytes(e.memory.peak().peak_bytes) << "</td><td class='l'>" << (i ? esc(why_lost(s, ranked[0], e)) : "—")
      << "</td></tr>";
  }
  o << "</table><h2>Where the step goes (exposed time, first pipeline stage)</h2>" << breakdown_chart(ranked);
  const Evaluation& best = ranked.front();
  o << "<h2>Memory per pipeline stage, winner</h2>" << memory_chart(best);
  o << what_if_table(s, best);
  if (s.has_search) o << what_if_search_table(s, best);
  // A layout (dp derived) at every size of the scenario where it is valid, charted, with the sizes
  // where more GPUs give fewer tokens/s and why.
  const bool several_sizes = s.cluster.nodes.size() > 1 || (s.has_search && s.search.nodes.size() > 1);
  const auto nodes_list = s.search.nodes.size() > 1 ? s.search.nodes : s.cluster.nodes;
  // Under a scaling chart: each size its layout does not fit, and each size slower than the one
  // before it, with what grew.
  auto scaling_notes = [&](const std::vector<Evaluation>& evs) {
    for (const Evaluation& e : evs)
      if (e.memory.oom)
        o << "<p><b style='color:#c0392b'>Out of memory on " << e.gpus << " GPUs:</b> " << memory_need(e.memory)
          << "; its step is charted all the same.</p>";
    for (std::size_t i = 1; i < evs.size(); ++i)
      if (evs[i].tokens_per_s < evs[i - 1].tokens_per_s)
        o << "<p><b style='color:#c0392b'>Slower with more GPUs:</b> " << esc(why_slower(evs[i - 1], evs[i])) << ".</p>";
  };
  auto scaling_section = [&](const char* whose, const Layout& l) {
    std::vector<Evaluation> evs;
    for (int n : nodes_list) {
      const int gpus = n * s.cluster.gpus_per_node;
      if (gpus % (l.tp * l.pp) != 0) continue;
      try {
        EvalOptions opt;
        opt.straggler_baseline = s.stragglers.given;
        evs.push_back(evaluate(s, resolve_layout(s, l, false, n), n, opt));
      } catch (const std::exception&) {
      }
    }
    if (evs.size() < 2) return evs;
    // The best layout at every size already charted above: the same chart again says nothing new.
    bool charted = evs.size() == best_sizes.size();
    for (std::size_t i = 0; charted && i < evs.size(); ++i)
      charted = evs[i].nodes == best_sizes[i].nodes && evs[i].layout == best_sizes[i].layout;
    if (charted) return evs;
    o << "<h2>Scaling of " << whose << " layout</h2><p class='note'>" << esc(describe_short(evs.front().layout)) << " on "
      << format_nodes(evs.front().nodes) << "; data parallelism grows with the nodes.</p>" << scaling_chart(evs, false);
    scaling_notes(evs);
    return evs;
  };
  std::vector<Evaluation> sweep;
  // How many nodes to buy is decided on the best layout at each size: charted first.
  if (best_sizes.size() > 1) {
    o << "<h2>Scaling with the best layout at each size</h2><p class='note'>The layout the search ranks first at each size ("
      << (s.training.tokens_total > 0 ? "listed under Training below" : "its degrees under the GPU count") << ").</p>"
      << scaling_chart(best_sizes, true);
    scaling_notes(best_sizes);
  }
  if (several_sizes) {
    sweep = scaling_section(s.has_search ? "the winner's" : "the scenario's", best.layout);
    // The layout the scenario proposes, where the search found another: how it scales is often
    // the point of the meeting (the slow link that more nodes make worse).
    if (s.has_search && s.has_layout) {
      bool same = false;
      try {
        same = resolve_layout(s, s.layout, false, best.nodes) == best.layout;
      } catch (const std::exception&) {
      }
      if (!same) scaling_section("the scenario's", s.layout);
    }
  }
  // Capacity is decided on the best layout at each size where the search gives one, else on the
  // winner's layout across the sizes.
  if (s.training.tokens_total > 0) {
    const std::string whose = std::string(s.has_search ? "The winner's" : "The scenario's") + " layout, " + describe_short(best.layout);
    if (best_sizes.size() > 1)
      o << capacity_table(s, best_sizes, "The best layout at each size, as the search ranked it", true);
    else if (sweep.size() > 1)
      o << capacity_table(s, sweep, whose + ", with data parallelism growing with the nodes", false);
    else
      o << capacity_table(s, {best}, whose, false);
  }
  if (s.stragglers.given) {
    std::vector<Evaluation> one;
    if (sweep.size() <= 1) {
      EvalOptions opt;
      opt.straggler_baseline = true;
      one.push_back(evaluate(s, best.layout, best.nodes, opt));
    }
    o << straggler_table(s, sweep.size() > 1 ? sweep : one);
  }
  if (!s.compare.empty()) o << comparison_section(s);
  EvalOptions traced;
  traced.record_timeline = true;
  const Evaluation t = evaluate(s, best.layout, best.nodes, traced);
  o << "<h2>One step of the winner</h2><p class='note'>" << esc(describe(best.layout)) << ", " << format_seconds(t.step.step_time_s)
    << "; one representative GPU per pipeline stage. The top row is the critical path: the chain of tasks, each started by the end of the one "
       "before it, that sets the step's length.</p>"
    << timeline_chart(t.step);
  const std::string path_summary = critical_path_summary(t.step, best.layout);
  if (!path_summary.empty())
    o << "<p class='note'>Critical path (the top row): " << esc(path_summary)
      << ", the time its tasks lost to compute slowed by communication beside it and to links shared with other flows.</p>";
  o << "<p class='note'>Generated by trainsim planner report. Compression effects on convergence are not simulated.</p></body></html>\n";
  return o.str();
}

}  // namespace trainsim
