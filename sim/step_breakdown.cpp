#include "step_graph.h"

#include <algorithm>

namespace trainsim::sim::detail {

// Exposed time of GPU 0's compute queue: its own work by category; each idle gap goes to what the
// next task waited for (the part of the gap during which that transfer or collective was running
// is communication, the rest is pipeline bubble); the tail after its last task goes to the
// collective still running, or to the bubble while other stages finish.
void Builder::breakdown(StepResult& r) {
  double* b = r.breakdown_s;
  double t = 0;
  auto attribute_wait = [&](double from, double to, TaskId waited) {
    if (to <= from) return;
    // Look through zero-length hand-off tasks to the transfer or collective behind them.
    while (waited >= 0 && e_.finish(waited) <= e_.start(waited) && e_.binding_predecessor(waited) >= 0)
      waited = e_.binding_predecessor(waited);
    if (waited >= 0) {
      const int cat = e_.spec(waited).category;
      if (cat == kPpComm || cat == kDpComm || cat == kTpComm) {
        // A queue of collectives runs back to back: the wait covers every one of them that ran
        // during the gap, not only the last.
        double covered_from = e_.start(waited);
        for (TaskId t = waited; e_.binding_predecessor(t) >= 0;) {
          const TaskId p = e_.binding_predecessor(t);
          if (e_.spec(p).category != cat || e_.finish(p) < e_.start(t) - 1e-12) break;
          covered_from = e_.start(p);
          t = p;
        }
        const double busy_from = std::max(from, covered_from);
        const double busy = std::max(0.0, to - busy_from);
        b[cat] += busy;
        b[kBubble] += (to - from) - busy;
        return;
      }
    }
    b[kBubble] += to - from;
  };
  // The periodicity's markers: the breakdown as GPU 0's first forward of each of the last two
  // periods starts, or, for the cut comparison, as the last task before each cut ends (before any
  // wait for the first task after it).
  TaskId markers[2] = {-1, -1};
  if (period_ > 0 && sim_index_[0] >= 0)
    for (int i = 0; i < 2; ++i)
      markers[i] = cut_ ? cut_first_[sim_index_[0]][i] : h_.fwd_start[hidx(0, 0, microbatches_ - (2 - i) * period_)];
  for (const Gpu0Task& g : gpu0_tasks_) {
    const TaskId task = g.id;
    const double s = e_.start(task), f = e_.finish(task);
    if (cut_)
      for (int i = 0; i < 2; ++i)
        if (task == markers[i]) std::copy(b, b + kCategories, marker_breakdown_[i]);
    if (s > t) attribute_wait(t, s, e_.binding_predecessor(task));
    if (!cut_)
      for (int i = 0; i < 2; ++i)
        if (task == markers[i]) std::copy(b, b + kCategories, marker_breakdown_[i]);
    const double span = f - std::max(s, t);
    if (g.nparts == 0) {
      b[e_.spec(task).category] += span;
    } else {
      // Fixed compute by category; whatever the task took beyond it is its fused TP traffic, and,
      // with comm-compute interference, compute slowed by the NCCL kernels beside it: TP is
      // charged up to its idle-link time, the rest to the task's categories in proportion to
      // their compute (a backward's slowdown is not its recompute's).
      double fixed = 0;
      for (int i = 0; i < g.nparts; ++i) b[g.cat[i]] += g.seconds[i], fixed += g.seconds[i];
      const double beyond = std::max(0.0, span - fixed);
      const double tp = any_interference() ? std::min(beyond, g.tp_idle_s) : beyond;
      b[kTpComm] += tp;
      if (fixed > 0)
        for (int i = 0; i < g.nparts; ++i) b[g.cat[i]] += (beyond - tp) * (g.seconds[i] / fixed);
      else
        b[g.cat[0]] += beyond - tp;
    }
    t = std::max(t, f);
  }
  if (r.step_time_s > t) {
    TaskId last_comm = gpu0_comm_.empty() ? -1 : gpu0_comm_.back();
    if (last_comm >= 0 && e_.finish(last_comm) > t) {
      // The tail waits on communication queued behind the optimizer or the last backward.
      const double end = std::min(r.step_time_s, e_.finish(last_comm));
      b[kDpComm] += end - t;
      t = end;
    }
    b[kBubble] += r.step_time_s - t;
  }
}

}  // namespace trainsim::sim::detail
