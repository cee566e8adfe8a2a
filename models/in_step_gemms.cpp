#include "in_step_gemms.h"

#include <cstdio>
#include <limits>

namespace trainsim {

std::vector<GemmLengthBin> gemms_by_length(const std::vector<InStepGemm>& gemms) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<GemmLengthBin> bins{{0, 100e-6}, {100e-6, 300e-6}, {300e-6, 1e-3}, {1e-3, inf}};
  for (const InStepGemm& g : gemms)
    for (GemmLengthBin& b : bins)
      if (g.measured_s >= b.lo_s && g.measured_s < b.hi_s) {
        ++b.gemms;
        b.measured_s += g.measured_s * g.calls_per_step;
        b.predicted_s += g.predicted_s * g.calls_per_step;
        break;
      }
  return bins;
}

std::string describe(const std::vector<GemmLengthBin>& bins) {
  std::string out;
  char part[96];
  for (const GemmLengthBin& b : bins) {
    if (b.gemms == 0 || b.measured_s <= 0) continue;
    const double err = 100 * (b.predicted_s / b.measured_s - 1);
    if (b.lo_s == 0) std::snprintf(part, sizeof part, "under %g ms %+.1f%% (%d)", 1e3 * b.hi_s, err, b.gemms);
    else if (b.hi_s == std::numeric_limits<double>::infinity()) std::snprintf(part, sizeof part, "from %g ms %+.1f%% (%d)", 1e3 * b.lo_s, err, b.gemms);
    else std::snprintf(part, sizeof part, "%g-%g ms %+.1f%% (%d)", 1e3 * b.lo_s, 1e3 * b.hi_s, err, b.gemms);
    out += (out.empty() ? "" : ", ") + std::string(part);
  }
  return out;
}

}  // namespace trainsim
