#include "critical_path.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "text_report.h"

namespace trainsim {

CriticalPath summarize_critical_path(const sim::StepResult& r, const Layout& l) {
  CriticalPath c;
  c.slices = r.critical_path.size();
  std::map<int, double> by_stage;
  for (const auto& e : r.critical_path) {
    const double took = e.end_s - e.start_s;
    by_stage[sim::rank_coordinates(l, e.gpu).stage] += took;
    c.seconds += took;
    c.contention_s += std::max(0.0, took - e.uncontended_s);
  }
  for (const auto& [stage, t] : by_stage) c.by_stage.push_back({stage, t});
  std::sort(c.by_stage.begin(), c.by_stage.end(),
            [](const auto& a, const auto& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
  return c;
}

std::string critical_path_summary(const sim::StepResult& r, const Layout& l) {
  const CriticalPath c = summarize_critical_path(r, l);
  if (!(c.seconds > 0)) return "";
  std::ostringstream o;
  o << c.slices << " slices, runs on ";
  char buf[64];
  for (std::size_t i = 0; i < c.by_stage.size() && i < 3; ++i) {
    std::snprintf(buf, sizeof buf, "%sstage %d %.1f%%", i ? ", " : "", c.by_stage[i].first, 100 * c.by_stage[i].second / c.seconds);
    o << buf;
  }
  if (c.by_stage.size() > 3) o << ", ...";
  std::snprintf(buf, sizeof buf, " (%.1f%%)", 100 * c.contention_s / c.seconds);
  o << "; contention " << format_seconds(c.contention_s) << " of it" << buf;
  return o.str();
}

}  // namespace trainsim
