#include "reliability.h"

#include <algorithm>
#include <cmath>

namespace trainsim {

double checkpoint_bytes(double params) { return params * (2.0 + 12.0); }

double daly_interval_s(double checkpoint_s, double mtbf_s) {
  if (checkpoint_s >= 2.0 * mtbf_s) return mtbf_s;
  const double x = checkpoint_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * checkpoint_s * mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - checkpoint_s;
}

double daly_wall_per_work(double interval_s, double checkpoint_s, double restart_s, double mtbf_s) {
  const double M = mtbf_s;
  return M * std::exp(restart_s / M) * std::expm1((interval_s + checkpoint_s) / M) / interval_s;
}

ReliabilityResult reliability_for(const ReliabilitySpec& spec, int gpus, int nodes, double params, double step_s,
                                  double d2h_GBps) {
  ReliabilityResult r;
  // Any failure stops the job: the rates add.
  double per_hour = 0;
  if (spec.gpu_mtbf_hours > 0) per_hour += gpus / spec.gpu_mtbf_hours;
  if (spec.node_mtbf_hours > 0) per_hour += nodes / spec.node_mtbf_hours;
  r.job_mtbf_s = 3600.0 / per_hour;
  r.checkpoint_bytes = checkpoint_bytes(params);
  r.checkpoint_write_s = r.checkpoint_bytes / (spec.checkpoint_GBps * 1e9);
  r.restart_s = spec.restart_minutes * 60.0 + r.checkpoint_write_s;
  r.checkpoint_blocking_s = spec.async_checkpoint ? r.checkpoint_bytes / gpus / (d2h_GBps * 1e9) : r.checkpoint_write_s;
  r.rework_s = r.restart_s + (spec.async_checkpoint ? r.checkpoint_write_s : 0.0);
  // A checkpoint is taken between steps: the optimum rounded to the better of its two neighbouring
  // whole numbers of steps (an asynchronous one no sooner than the last one is written).
  const double delta = r.checkpoint_blocking_s;
  const double tau = daly_interval_s(delta, r.job_mtbf_s);
  const double least = spec.async_checkpoint ? std::max(1.0, std::ceil(r.checkpoint_write_s / step_s)) : 1.0;
  const double lo = std::max(least, std::floor(tau / step_s)), hi = std::max(least, std::ceil(tau / step_s));
  auto wall = [&](double steps) { return daly_wall_per_work(steps * step_s, delta, r.rework_s, r.job_mtbf_s); };
  r.interval_steps = wall(lo) <= wall(hi) ? lo : hi;
  r.interval_s = r.interval_steps * step_s;
  // Where failures come faster than a checkpoint and a restart, the wall time overflows: the job
  // never finishes, goodput 0.
  r.goodput = 1.0 / wall(r.interval_steps);
  r.computed = true;
  return r;
}

}  // namespace trainsim
