#include "step_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipeline_schedule.h"

namespace trainsim::sim::detail {

void Builder::mark_descendants(const std::vector<TaskId>* const* seeds, int sets, std::uint8_t first_bit, double* earliest) {
  std::vector<std::uint8_t>& down = ws_.downstream;
  if (down.size() != e_.task_count()) down.assign(e_.task_count(), 0);
  std::uint8_t* dn = down.data();
  std::uint8_t mask = 0;
  for (int k = 0; k < sets; ++k) {
    const std::uint8_t bit = static_cast<std::uint8_t>(first_bit << k);
    earliest[k] = std::numeric_limits<double>::infinity();
    for (TaskId f : *seeds[k]) {
      if (f < 0) {
        earliest[k] = -1.0;
        break;
      }
      dn[f] |= bit;
    }
    if (earliest[k] >= 0) mask |= bit;
  }
  // The engine completes a task only after every task it waits for: its completion order is a
  // topological order of the graph, so one pass over it carries the bits to every descendant.
  const std::vector<TaskId>& order = e_.completion_order();
  const TaskId* o = order.data();
  for (std::size_t i = 0, n = order.size(); i < n; ++i) {
    const TaskId t = o[i];
    const std::uint8_t bits = dn[t] & mask;
    if (!bits) continue;
    const double st = e_.start(t);
    for (int k = 0; k < sets; ++k)
      if (bits & (first_bit << k)) earliest[k] = std::min(earliest[k], st);
    e_.for_each_successor(t, [dn, bits](TaskId s) { dn[s] |= bits; });
  }
}

void Builder::fill_roles() {
  role_.assign(e_.task_count(), -1);
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    for (int c = 0; c < vpp_; ++c) {
      const int vs = c * L_.pp + stage;
      const std::size_t base = hidx(g, vs, 0);
      const std::int64_t fwd_role = role_key(0, g, vs, 0), bwd_role = role_key(1, g, vs, 0), rec_role = role_key(4, g, vs, 0);
      for (int mb = 0; mb < microbatches_; ++mb) {
        // Passes of one task only, or of a recompute and one task: a pass built layer by layer has
        // no single task to compare.
        const std::size_t i = base + mb;
        if (h_.fwd_start[i] >= 0 && h_.fwd_start[i] == h_.fwd_done[i]) role_[h_.fwd_start[i]] = fwd_role + mb;
        if (h_.bwd_start[i] >= 0 && h_.bwd_start[i] == h_.bwd_done[i]) role_[h_.bwd_start[i]] = bwd_role + mb;
        if (h_.recompute[i] >= 0) {
          role_[h_.recompute[i]] = rec_role + mb;
          role_[h_.bwd_done[i]] = bwd_role + mb;
        }
      }
    }
  }
  for (const auto& [key, t] : ws_.transfer_roles) role_[t] = key;
}

bool Builder::cut_states(const std::vector<TaskId> (&seeds)[2], bool (&valid)[2], double* end) {
  // Which tasks come after each cut, and which before it are waited for across it, depend on the
  // graph alone: worked out when the seeds change, kept with the graph.
  for (int c = 0; c < 2; ++c) {
    valid[c] = std::find(seeds[c].begin(), seeds[c].end(), -1) == seeds[c].end();
    ws_.frontier[c].clear();
  }
  if (!valid[1]) return false;
  std::vector<std::uint8_t>& down = ws_.downstream;
  if (seeds[0] != ws_.cut_kept_seeds[0] || seeds[1] != ws_.cut_kept_seeds[1] || down.size() != e_.task_count()) {
    down.assign(e_.task_count(), 0);
    double unused[2];
    const std::vector<TaskId>* sets[2] = {&seeds[0], &seeds[1]};
    mark_descendants(sets, 2, 2, unused);
    const std::uint8_t* dn = down.data();
    ws_.before_later.clear();
    for (auto& w : ws_.waited_across) w.clear();
    for (TaskId t = 0, n = static_cast<TaskId>(e_.task_count()); t < n; ++t) {
      const std::uint8_t before = static_cast<std::uint8_t>(~dn[t] & 6);  // bit 2 << c: before cut c
      if (!before) continue;
      if (before & 4) ws_.before_later.push_back(t);
      std::uint8_t across = 0;
      e_.for_each_successor(t, [dn, &across](TaskId s) { across |= dn[s]; });
      across &= before;
      for (int c = 0; c < 2; ++c)
        if (across & (2 << c)) ws_.waited_across[c].push_back(t);
    }
    for (int c = 0; c < 2; ++c) ws_.cut_kept_seeds[c] = seeds[c];
  }
  // Everything after a cut starts once one of its seeds has: the earliest start after it is the
  // seeds' earliest. A task before the cut is part of its state if one after it waits for it, or
  // if it is still running then.
  double after[2];
  for (int c = 0; c < 2; ++c) {
    after[c] = std::numeric_limits<double>::infinity();
    if (valid[c])
      for (TaskId t : seeds[c]) after[c] = std::min(after[c], e_.start(t));
  }
  const std::uint8_t* dn = down.data();
  const std::int64_t* role = role_.data();
  auto take = [&](int c, TaskId t) {
    if (role[t] < 0) valid[c] = false;  // a task with no counterpart a period away
    else ws_.frontier[c].push_back({role[t], t});
  };
  double last = 0;
  for (TaskId t : ws_.before_later) {
    const double f = e_.finish(t);
    last = std::max(last, f);
    if (f > after[1]) take(1, t);
    if (!(dn[t] & 2) && f > after[0]) take(0, t);
  }
  for (int c = 0; c < 2; ++c) {
    for (TaskId t : ws_.waited_across[c]) take(c, t);
    auto& state = ws_.frontier[c];
    std::sort(state.begin(), state.end());
    state.erase(std::unique(state.begin(), state.end()), state.end());
  }
  *end = last;
  return valid[1];
}

bool Builder::choose_cut() {
  if (sim_index_[0] < 0 || cut_bytes_.empty()) return false;
  // The first task that the run of M + P micro-batches does not share starts when the earliest of
  // its seeds does (everything descending from them starts after one has ended).
  diverge_s_ = std::numeric_limits<double>::infinity();
  for (TaskId t : cut_diverge_) {
    if (t < 0) return false;
    diverge_s_ = std::min(diverge_s_, e_.start(t));
  }
  if (!ws_.roles_filled) {
    fill_roles();
    ws_.roles_filled = true;
  }
  const int P = period_, v = vpp_, total = microbatches_ * v;
  const PipelineKind pk = L_.schedule == Schedule::interleaved ? PipelineKind::interleaved : PipelineKind::one_f_one_b;
  std::vector<int> warm(sim_gpus_.size());
  int longest = 0;
  for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
    warm[gi] = pipeline_warmup(pk, L_.pp, v, microbatches_, sim_gpus_[gi] / (L_.tp * L_.dp));
    longest = std::max(longest, warm[gi]);
  }
  // The task of op `pos` of `gpu`'s order: its first, or its last.
  auto op_task = [&](int gpu, const std::vector<PipeOp>& order, int pos, bool last) {
    const PipeOp& op = order[pos];
    const std::size_t i = hidx(gpu, op.chunk * L_.pp + gpu / (L_.tp * L_.dp), op.microbatch);
    return op.forward ? (last ? h_.fwd_done[i] : h_.fwd_start[i]) : (last ? h_.bwd_done[i] : h_.bwd_start[i]);
  };
  std::vector<TaskId> seeds(sim_gpus_.size());
  std::vector<TaskId> (&both)[2] = ws_.cut_seeds;
  int exact_tries = 0;
  for (int nb = total - 1 - v; nb - P * v >= longest + 1 && exact_tries < 4; --nb) {
    // A quick bound first: the two ops before each stage's cut and the transfers they send.
    double end = 0;
    for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
      const int g = sim_gpus_[gi];
      const std::vector<PipeOp>& order = cached_pipeline_order(pk, L_.pp, v, microbatches_, g / (L_.tp * L_.dp));
      const int pos = warm[gi] + 2 * (nb - warm[gi]);
      for (int k = 1; k <= 2; ++k) {
        const TaskId t = op_task(g, order, pos - k, true);
        end = std::max(end, e_.finish(t));
        e_.for_each_successor(t, [&](TaskId s) {
          if (lane_stream_[s] == 2) end = std::max(end, e_.finish(s));
        });
      }
      seeds[gi] = op_task(g, order, pos, false);
    }
    if (!(end < diverge_s_)) continue;
    // Then exactly: everything that does not descend from the cut has ended (its state is kept
    // for measure_cut).
    ++exact_tries;
    both[1] = seeds;
    both[0].resize(sim_gpus_.size());
    for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
      const int g = sim_gpus_[gi];
      const std::vector<PipeOp>& order = cached_pipeline_order(pk, L_.pp, v, microbatches_, g / (L_.tp * L_.dp));
      both[0][gi] = op_task(g, order, warm[gi] + 2 * (nb - P * v - warm[gi]), false);
    }
    double x_end = 0;
    if (!cut_states(both, cut_state_valid_, &x_end)) return false;
    if (!(x_end < diverge_s_)) continue;
    for (int c = 0; c < 2; ++c) {
      const int n = c == 1 ? nb : nb - P * v;
      for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
        const int g = sim_gpus_[gi];
        const std::vector<PipeOp>& order = cached_pipeline_order(pk, L_.pp, v, microbatches_, g / (L_.tp * L_.dp));
        const int pos = warm[gi] + 2 * (n - warm[gi]);
        cut_last_[gi][c] = op_task(g, order, pos - 1, true);
        cut_first_[gi][c] = op_task(g, order, pos, false);
        if (g == 0) marker_bytes_[c][0] = cut_bytes_[pos].first, marker_bytes_[c][1] = cut_bytes_[pos].second;
      }
    }
    return true;
  }
  return false;
}

void Builder::measure_cut() {
  // A schedule of fixed durations is a max-plus linear system: what runs after a cut (a set X of
  // tasks holding every dependency of its members) depends only on when the tasks of X that others
  // wait for end (the cut's frontier). With comm/compute interference and shared links it also
  // depends on the tasks of X still running once the rest has begun, so their starts and ends are
  // part of the cut's state too. Each stage is cut before a forward of its steady phase, where the
  // order that follows is the same a period (P micro-batches, P v forwards) later. The run of
  // M + P micro-batches is this run up to the time the first task of this run's cool-down starts
  // (its orders are the same up to there, and the simulation deterministic), and the later cut's
  // tasks have all ended by then. So if the later cut's state is the earlier one's exactly lambda
  // later, the longer run after its later cut is this run after its earlier cut, lambda later, and
  // by induction the step grows by lambda a period. X is everything that does not descend from the
  // first task after the cut on some stage.
  Periodicity& p = periodicity_;
  if (!cut_valid_ || sim_index_[0] < 0) return;
  const int P = period_, M = microbatches_;
  // Both states were collected by choose_cut.
  if (!cut_state_valid_[0]) return;
  // The two states pair up, micro-batch for micro-batch P apart (keys shift by P in their last
  // digit, so sorted keys pair in order).
  const auto& a = ws_.frontier[0];
  const auto& b = ws_.frontier[1];
  if (a.empty() || a.size() != b.size()) return;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (b[i].first % M < P || b[i].first - P != a[i].first) return;
  const std::size_t g0 = static_cast<std::size_t>(sim_index_[0]);
  p.lambda_s = e_.finish(cut_last_[g0][1]) - e_.finish(cut_last_[g0][0]);
  double dev = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dev = std::max(dev, std::abs(e_.finish(b[i].second) - e_.finish(a[i].second) - p.lambda_s));
    dev = std::max(dev, std::abs(e_.start(b[i].second) - e_.start(a[i].second) - p.lambda_s));
  }
  p.deviation_s = dev;
  for (int c = 0; c < kCategories; ++c) p.breakdown_s[c] = marker_breakdown_[1][c] - marker_breakdown_[0][c];
  p.dp_bytes = marker_bytes_[1][0] - marker_bytes_[0][0];
  p.tp_bytes = marker_bytes_[1][1] - marker_bytes_[0][1];
  p.measured = true;
}

void Builder::measure_periodicity() {
  Periodicity& p = periodicity_;
  const int P = period_, M = microbatches_;
  if (sim_index_[0] < 0) return;
  const PipelineKind pk = L_.schedule == Schedule::interleaved ? PipelineKind::interleaved : PipelineKind::one_f_one_b;
  auto start = [&](const std::vector<TaskId>& firsts, int gpu, int vs, int mb) { return e_.start(firsts[hidx(gpu, vs, mb)]); };
  p.lambda_s = start(h_.fwd_start, 0, 0, M - P) - start(h_.fwd_start, 0, 0, M - 2 * P);
  double dev = 0;
  auto repeats = [&](double now, double before) { dev = std::max(dev, std::abs(now - before - p.lambda_s)); };
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    const std::vector<PipeOp>& order = cached_pipeline_order(pk, L_.pp, vpp_, M, stage);
    std::size_t last_forward = 0;
    for (std::size_t i = 0; i < order.size(); ++i)
      if (order[i].forward) last_forward = i;
    // Every forward of the last P micro-batches; the last P backwards of each chunk that come
    // before the stage's last forward (a longer schedule runs them the same way), and the
    // communication queued by then (ZeRO-2/3 traffic that could fall behind the compute).
    std::vector<int> taken(vpp_, 0);
    for (std::size_t i = last_forward; i-- > 0;) {
      const PipeOp& op = order[i];
      if (op.forward || op.microbatch < P || taken[op.chunk] == P) continue;
      ++taken[op.chunk];
      const int vs = op.chunk * L_.pp + stage, k = op.microbatch;
      repeats(start(h_.bwd_start, g, vs, k), start(h_.bwd_start, g, vs, k - P));
      const TaskId c0 = h_.comm_after_bwd[hidx(g, vs, k)], c1 = h_.comm_after_bwd[hidx(g, vs, k - P)];
      if (c0 != c1 && c1 >= 0) repeats(e_.finish(c0), e_.finish(c1));
    }
    for (int c = 0; c < vpp_; ++c)
      for (int k = M - P; k < M; ++k) repeats(start(h_.fwd_start, g, c * L_.pp + stage, k), start(h_.fwd_start, g, c * L_.pp + stage, k - P));
  }
  p.deviation_s = dev;
  for (int c = 0; c < kCategories; ++c) p.breakdown_s[c] = marker_breakdown_[1][c] - marker_breakdown_[0][c];
  p.dp_bytes = marker_bytes_[1][0] - marker_bytes_[0][0];
  p.tp_bytes = marker_bytes_[1][1] - marker_bytes_[0][1];
  p.measured = true;
}

}  // namespace trainsim::sim::detail
