#include "engine.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

namespace trainsim::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

void Engine::reserve(std::size_t tasks, std::size_t edges) {
  tasks_.reserve(tasks);
  unslowed_.reserve(tasks);
  shares_.reserve(tasks);
  waits_.reserve(tasks);
  specs_.reserve(tasks);
  edges_.reserve(edges);
}

void Engine::reset() {
  tasks_.clear();
  unslowed_.clear();
  shares_.clear();
  waits_.clear();
  specs_.clear();
  edges_.clear();
  stream_last_.clear();
  sequences_ = 0;
  link_capacity_.clear();
  link_base_.clear();
  link_div_.clear();
  link_sequence_.clear();
  paths_.clear();
  path_div_.clear();
  fractional_ = false;
  flows_.clear();
  active_.clear();
  makespan_ = 0;
  events_ = rate_updates_ = 0;
  ran_ = false;
  tails_valid_ = false;
  cap_left_.clear();
  unfrozen_on_link_.clear();
  frozen_.clear();
  link_slot_.clear();
  offset_.clear();
  fill_.clear();
  members_.clear();
  touched_.clear();
  link_use_.clear();
  interf_.clear();
  processor_count_ = 0;
}

StreamId Engine::add_stream() {
  stream_last_.push_back(-1);
  return static_cast<StreamId>(stream_last_.size() - 1);
}

LinkId Engine::add_link(double capacity_Bps) {
  if (!(capacity_Bps > 0)) throw std::invalid_argument("link capacity must be positive");
  const LinkId id = static_cast<LinkId>(link_capacity_.size());
  link_capacity_.push_back(capacity_Bps);
  link_base_.push_back(id);
  link_div_.push_back(1);
  link_sequence_.push_back(kNoFlow);
  return id;
}

LinkId Engine::add_fractional_link(LinkId base, int k) {
  if (base < 0 || base >= static_cast<LinkId>(link_capacity_.size()) || link_base_[base] != base)
    throw std::invalid_argument("a fractional link's base must be a link of its own");
  if (k < 1) throw std::invalid_argument("a fractional link stands for one of k >= 1 flows");
  if (k == 1) return base;
  const LinkId id = static_cast<LinkId>(link_capacity_.size());
  link_capacity_.push_back(link_capacity_[base]);  // never read: paths hold the base
  link_base_.push_back(base);
  link_div_.push_back(k);
  link_sequence_.push_back(kNoFlow);
  return id;
}

ProcessorId Engine::add_processor() {
  // Slots of earlier runs are reused with their vectors' memory.
  if (processor_count_ == processors_.size()) processors_.emplace_back();
  processors_[processor_count_].idle();
  return static_cast<ProcessorId>(processor_count_++);
}

void Engine::recompute_rates() {
  ++rate_updates_;
  // Progressive filling: repeatedly find the most constrained link (least capacity left per
  // unfrozen flow), give each of its unfrozen flows that share, and remove them.
  const std::size_t nl = link_capacity_.size();
  if (cap_left_.size() != nl) {
    cap_left_.assign(nl, 0.0);
    unfrozen_on_link_.assign(nl, 0);
    link_slot_.assign(nl, -1);
  }
  // With fractional links a flow counts on a link as 1/k of a flow: shares are taken over the
  // unfrozen flows' weights (without any, their count, the same numbers).
  const bool weighted = fractional_;
  if (weighted && unfrozen_weight_.size() != nl) unfrozen_weight_.assign(nl, 0.0);
  touched_.clear();
  for (const ActiveFlow& a : active_) {
    const std::int32_t f = a.flow;
    for (std::int32_t p = flows_[f].path_begin; p < flows_[f].path_end; ++p) {
      const LinkId l = paths_[p];
      if (unfrozen_on_link_[l]++ == 0) {
        cap_left_[l] = link_capacity_[l];
        link_slot_[l] = static_cast<std::int32_t>(touched_.size());
        touched_.push_back(l);
        if (weighted) unfrozen_weight_[l] = 0;
      }
      if (weighted) unfrozen_weight_[l] += 1.0 / path_div_[p];
    }
  }
  // Flows crossing each touched link, grouped by link (counting sort into members_).
  offset_.assign(touched_.size() + 1, 0);
  for (std::size_t i = 0; i < touched_.size(); ++i) offset_[i + 1] = offset_[i] + unfrozen_on_link_[touched_[i]];
  fill_.assign(offset_.begin(), offset_.end() - 1);
  members_.resize(offset_.back());
  for (std::size_t ai = 0; ai < active_.size(); ++ai) {
    const std::int32_t f = active_[ai].flow;
    for (std::int32_t p = flows_[f].path_begin; p < flows_[f].path_end; ++p)
      members_[fill_[link_slot_[paths_[p]]]++] = static_cast<std::int32_t>(ai);
  }
  frozen_.assign(active_.size(), 0);
  std::size_t left = 0;
  for (std::size_t ai = 0; ai < active_.size(); ++ai) {
    const std::int32_t f = active_[ai].flow;
    if (flows_[f].path_begin == flows_[f].path_end) {
      active_[ai].rate = kInf;
      frozen_[ai] = 1;
    } else {
      ++left;
    }
  }
  // The most constrained link is the least share, the first in touched_ order among equal ones.
  // Among a few links a scan finds it; among many (every GPU's flows on the full topology) a
  // min-heap of (share, position) does, with an entry pushed whenever a link's share changes: a
  // popped entry that no longer holds its link's share, or whose link has no unfrozen flow left,
  // is dropped. Both pick the same link every round, so they give the same rates to the bit.
  const bool by_heap = touched_.size() > kScanLinks;
  auto share_of = [this, weighted](LinkId l) { return cap_left_[l] / (weighted ? unfrozen_weight_[l] : unfrozen_on_link_[l]); };
  share_heap_.clear();
  if (by_heap) {
    for (std::size_t i = 0; i < touched_.size(); ++i) share_heap_.push_back({share_of(touched_[i]), static_cast<std::int32_t>(i)});
    std::make_heap(share_heap_.begin(), share_heap_.end(), std::greater<>());
  }
  while (left > 0) {
    std::size_t best = touched_.size();
    double best_share = kInf;
    if (by_heap) {
      while (!share_heap_.empty()) {
        std::pop_heap(share_heap_.begin(), share_heap_.end(), std::greater<>());
        const auto [share, i] = share_heap_.back();
        share_heap_.pop_back();
        const LinkId l = touched_[i];
        if (unfrozen_on_link_[l] == 0 || share_of(l) != share) continue;
        best = static_cast<std::size_t>(i);
        best_share = share;
        break;
      }
    } else {
      for (std::size_t i = 0; i < touched_.size(); ++i) {
        const LinkId l = touched_[i];
        if (unfrozen_on_link_[l] == 0) continue;
        const double share = share_of(l);
        if (share < best_share) { best_share = share; best = i; }
      }
    }
    if (best == touched_.size()) break;
    const LinkId bottleneck = touched_[best];
    for (std::int32_t k = offset_[best]; k < offset_[best + 1]; ++k) {
      const std::int32_t ai = members_[k];
      if (frozen_[ai]) continue;
      frozen_[ai] = 1;
      --left;
      active_[ai].rate = std::max(best_share, 0.0);
      const std::int32_t f = active_[ai].flow;
      for (std::int32_t p = flows_[f].path_begin; p < flows_[f].path_end; ++p) {
        const LinkId l = paths_[p];
        if (weighted) {
          cap_left_[l] -= best_share / path_div_[p];
          unfrozen_weight_[l] -= 1.0 / path_div_[p];
        } else {
          cap_left_[l] -= best_share;
        }
        unfrozen_on_link_[l]--;
        if (by_heap && l != bottleneck && unfrozen_on_link_[l] > 0) {
          share_heap_.push_back({share_of(l), link_slot_[l]});
          std::push_heap(share_heap_.begin(), share_heap_.end(), std::greater<>());
        }
      }
    }
  }
  for (LinkId l : touched_) unfrozen_on_link_[l] = 0;
}

void Engine::find_tails() {
  for (TaskId id : tail_tasks_) {
    Task& t = tasks_[id];
    const std::int32_t seq = t.sequence;
    // Tasks sharing flows have the same tail when of the same sequence (else their links are
    // marked shared and neither has one) and the same unslowed time; the task shared is earlier,
    // so its tail is known.
    const TaskId shared = shares_[id];
    if (shared >= 0 && unslowed_[shared] == unslowed_[id]) {
      t.tail = tasks_[shared].tail;
      continue;
    }
    // A lone flow takes its bottleneck's capacity (an empty path delivers at once); the task ends
    // with its slowest flow.
    double tail = 0;
    for (std::int32_t f = t.flows_begin; f < t.flows_end && tail >= 0; ++f) {
      const Flow& fl = flows_[f];
      for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p)
        if (link_sequence_[paths_[p]] != seq) {
          tail = -1;
          break;
        }
      if (tail >= 0 && fl.lone_Bps != kInf) tail = std::max(tail, fl.bytes / fl.lone_Bps);
    }
    // The tail starts when the work on the processor ends: the unslowed time comes first.
    t.tail = tail >= 0 ? unslowed_[id] + tail : -1;
  }
  tails_valid_ = true;
}

void Engine::run() {
  EventQueue& queue = queue_;
  queue.clear(tasks_.size());
  // Tasks past their latency and tasks done, as stacks (each task enters each at most once), and
  // the order tasks complete in.
  const std::size_t n = tasks_.size();
  if (stack_capacity_ < n) {
    stack_capacity_ = n;
    ready_.reset(new TaskId[n]);
    completed_.reset(new TaskId[n]);
  }
  TaskId* const ready = ready_.get();
  TaskId* const completed = completed_.get();
  order_.resize(n);
  TaskId* const ORDER = order_.data();
  std::size_t n_order = 0;
  std::size_t n_ready = 0, n_completed = 0;
  link_use_.assign(link_capacity_.size(), 0);
  // A graph run before is run again from the dependency counts it was built with.
  // A graph's first run notes what later runs reuse: its roots, the tasks that may have a tail.
  if (!ran_) {
    roots_.clear();
    tail_tasks_.clear();
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      Task& t = tasks_[i];
      if (waits_[i] == 0) roots_.push_back(static_cast<TaskId>(i));
      t.tail = -1;
      if (t.sequence >= 0 && t.flows_end > t.flows_begin) tail_tasks_.push_back(static_cast<TaskId>(i));
    }
    ran_ = true;
    ran_tasks_ = n;
    tails_valid_ = false;
  } else if (n != ran_tasks_) {
    throw std::logic_error("tasks added to a graph after it ran");
  }
  for (std::size_t i = 0; i < n; ++i) tasks_[i].pending = waits_[i];
  for (std::size_t i = 0; i < processor_count_; ++i) processors_[i].idle();
  start_.resize(n);
  finish_.resize(n);
  binding_.resize(n);
  active_.clear();
  if (!tails_valid_) find_tails();
  // Slot 0 stands for "no sequence", so that tasks of none go through the same steps.
  sequence_running_.assign(static_cast<std::size_t>(sequences_) + 1, -1);
  // Nothing below adds tasks, edges, flows, links or interference: their storage stays put.
  Task* const T = tasks_.data();
  const Edge* const E = edges_.data();
  const Flow* const F = flows_.data();
  const LinkId* const PATH = paths_.data();
  std::int32_t* const LU = link_use_.data();
  const Interference* const IF = interf_.data();
  Processor* const PR = processors_.data();
  TaskId* const SEQ = sequence_running_.data() + 1;
  double* const START = start_.data();
  double* const FINISH = finish_.data();
  TaskId* const BINDING = binding_.data();
  double now = 0;
  bool rates_dirty = false;
  // Active flows keep their bytes left as of `since` and their rate; both change only when rates
  // are recomputed. `flow_next`, the earliest flow completion, is kept up to date as flows start,
  // finish and change rate, not rescanned at every event.
  double flow_next = kInf;
  auto finish_time = [](const ActiveFlow& a) {
    if (a.rate == kInf) return a.since;
    return a.rate > 0 ? a.since + a.remaining / a.rate : kInf;
  };

  // The largest slowdown among a processor's interferers changed at `now`: if its speed changed,
  // every fixed phase running on it is rescheduled.
  auto respeed = [&](Processor& pr, double rate) __attribute__((always_inline)) {
    if (rate == pr.rate) return;
    const double before = pr.rate;  // the rate of every running task still in its fixed work
    pr.rate = rate;
    for (Running& r : pr.running) {
      Task& t = T[r.task];
      // A task in its tail has done its fixed work: the processor's speed no longer matters to it.
      if (t.tail >= 0 && now >= t.work_end) continue;
      r.left = std::max(0.0, r.left - before * (now - r.since));
      r.since = now;
      t.work_end = now + r.left / rate;
      queue.schedule(r.task, t.tail >= 0 ? t.work_end + t.tail : t.work_end);
    }
  };
  // An interferer starts or stops. Only a change of the largest slowdown running can change the
  // processor's speed.
  auto interfere_on = [&](const Task& t) __attribute__((always_inline)) {
    for (std::int32_t i = t.interf_begin; i < t.interf_end; ++i) {
      Processor& pr = PR[IF[i].processor];
      const double x = IF[i].slowdown;
      if (x == pr.max_slowdown && pr.at_max > 0) {
        ++pr.at_max;
      } else if (x > pr.max_slowdown) {
        if (pr.at_max > 0) pr.below.push_back({pr.max_slowdown, pr.at_max});
        pr.max_slowdown = x;
        pr.at_max = 1;
        respeed(pr, IF[i].rate);
      } else {
        auto& lv = pr.below;
        std::size_t k = 0;
        while (k < lv.size() && lv[k].first != x) ++k;
        if (k < lv.size()) ++lv[k].second;
        else lv.push_back({x, 1});
      }
    }
  };
  auto interfere_off = [&](const Task& t) {
    for (std::int32_t i = t.interf_begin; i < t.interf_end; ++i) {
      Processor& pr = PR[IF[i].processor];
      const double x = IF[i].slowdown;
      auto& lv = pr.below;
      if (x == pr.max_slowdown && pr.at_max > 0) {
        if (--pr.at_max > 0) continue;
        // The largest of the others takes over (none: no slowdown).
        std::size_t top = lv.size();
        for (std::size_t k = 0; k < lv.size(); ++k)
          if (top == lv.size() || lv[k].first > lv[top].first) top = k;
        if (top == lv.size()) {
          pr.max_slowdown = 0;
        } else {
          pr.max_slowdown = lv[top].first;
          pr.at_max = lv[top].second;
          lv[top] = lv.back();
          lv.pop_back();
        }
        respeed(pr, 1.0 / (1.0 + pr.max_slowdown));
        continue;
      }
      std::size_t k = 0;
      while (lv[k].first != x) ++k;
      if (--lv[k].second > 0) continue;
      lv[k] = lv.back();
      lv.pop_back();
    }
  };
  // A task's one flow that starts on idle links (no active flow, no other reservation) is reserved:
  // the task is queued once, at its latency's end plus the flow's time at the bottleneck's rate.
  // Returns false if it cannot be.
  auto reserve = [&](Task& t, TaskId id) {
    const Flow& fl = F[t.flows_begin];
    if (fl.path_begin == fl.path_end) return false;
    for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p)
      if (LU[PATH[p]] != 0) return false;
    for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p) LU[PATH[p]] = -1 - id;
    t.slot = kReserved;
    return true;
  };
  auto unreserve = [&](Task& t) {
    const Flow& fl = F[t.flows_begin];
    for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p) LU[PATH[p]] = 0;
    t.slot = -1;
  };
  // Another flow needs a link of reserved task `id`: if its latency has not ended it goes back to
  // waiting for that, else its flow becomes an active one, as it has been since its latency ended.
  auto release = [&](TaskId id) {
    Task& t = T[id];
    unreserve(t);
    if (now < t.work_end) {
      queue.move_keeping_order(id, t.work_end);
      return;
    }
    queue.remove(id);
    const std::int32_t f = t.flows_begin;
    for (std::int32_t p = F[f].path_begin; p < F[f].path_end; ++p) ++LU[PATH[p]];
    t.flows_left = 1;
    ActiveFlow& a = active_.emplace_back();
    a.flow = f;
    a.task = id;
    a.remaining = F[f].bytes;
    a.since = t.work_end;
    a.rate = F[f].lone_Bps;
    a.finish = finish_time(a);
    flow_next = std::min(flow_next, a.finish);
  };
  // A task's run state is set here, when it starts (the fields its phases read later are written
  // by the phase that begins them).
  auto start = [&](TaskId id) __attribute__((always_inline)) {
    Task& t = T[id];
    START[id] = now;
    t.slot = -1;
    const std::int32_t sq = t.sequence;
    if ((SEQ[sq] >= 0) & (sq >= 0)) [[unlikely]] {
      order_.resize(n_order);  // the tasks completed, and no more
      throw std::logic_error("two tasks of one sequence overlap");
    }
    SEQ[sq] = sq >= 0 ? id : -1;
    if (t.interf_end > t.interf_begin) interfere_on(t);
    const double d = t.duration;
    // A task with a tail completes at one event, its fixed work's end plus the tail.
    if (d > 0 && t.processor >= 0) {
      Processor& pr = PR[t.processor];
      t.work_end = now + d / pr.rate;
      t.slot = static_cast<std::int32_t>(pr.running.size());
      pr.running.push_back({id, d, now});
      queue.schedule(id, t.tail >= 0 ? t.work_end + t.tail : t.work_end);
    } else if (t.tail < 0 && t.flows_end - t.flows_begin == 1 && reserve(t, id)) {
      // Its flow runs alone at its bottleneck's rate unless another flow needs one of its links
      // first: it completes at one event, or goes back on the general path by release().
      t.work_end = now + d;
      queue.schedule(id, t.work_end + F[t.flows_begin].bytes / F[t.flows_begin].lone_Bps);
    } else if (d > 0) {
      t.work_end = now + d;
      queue.schedule(id, t.tail >= 0 ? t.work_end + t.tail : t.work_end);
    } else if (t.tail > 0) {
      queue.schedule(id, now + t.tail);
    } else {
      ready[n_ready++] = id;  // latency phase is empty: go straight to flows or completion
    }
  };
  // Moves a task past its fixed phase: starts its flows, or completes it.
  auto after_fixed = [&](TaskId id) __attribute__((always_inline)) {
    Task& t = T[id];
    if (t.flows_end == t.flows_begin || t.tail >= 0) {
      completed[n_completed++] = id;
      return;
    }
    t.flows_left = t.flows_end - t.flows_begin;
    for (std::int32_t f = t.flows_begin; f < t.flows_end; ++f)
      for (std::int32_t p = F[f].path_begin; p < F[f].path_end; ++p)
        if (LU[PATH[p]] < 0) release(-1 - LU[PATH[p]]);
    for (std::int32_t f = t.flows_begin; f < t.flows_end; ++f)
      for (std::int32_t p = F[f].path_begin; p < F[f].path_end; ++p) ++LU[PATH[p]];
    for (std::int32_t f = t.flows_begin; f < t.flows_end; ++f) {
      const Flow& fl = F[f];
      // A flow alone on every link of its path runs at its bottleneck's capacity (max-min of one
      // flow); anything shared needs the full recomputation.
      const double rate = fl.lone_Bps;
      bool alone = true;
      for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p) alone &= LU[PATH[p]] == 1;
      ActiveFlow& a = active_.emplace_back();
      a.flow = f;
      a.task = id;
      a.remaining = fl.bytes;
      a.since = now;
      a.rate = alone ? rate : 0.0;
      a.finish = finish_time(a);
      if (!alone) rates_dirty = true;
      else flow_next = std::min(flow_next, a.finish);
    }
  };
  auto finish = [&](TaskId id) __attribute__((always_inline)) {
    Task& t = T[id];
    FINISH[id] = now;
    SEQ[t.sequence] = -1;
    if (t.interf_end > t.interf_begin) interfere_off(t);
    ORDER[n_order++] = id;
    for (std::int32_t e = t.succ_head; e >= 0; e = E[e].next) {
      const TaskId to = E[e].to;
      if (--T[to].pending == 0) {
        BINDING[to] = id;
        start(to);
      }
    }
  };

  for (const TaskId id : roots_) {
    BINDING[id] = -1;
    start(id);
  }

  while (true) {
    // Settle everything that happens at `now` without time passing.
    while (n_ready > 0 || n_completed > 0) {
      while (n_ready > 0) {
        const TaskId id = ready[--n_ready];
        after_fixed(id);
      }
      while (n_completed > 0) {
        const TaskId id = completed[--n_completed];
        finish(id);
      }
    }
    if (rates_dirty) {
      for (ActiveFlow& a : active_) {
        a.remaining = a.rate == kInf ? 0.0 : std::max(0.0, a.remaining - a.rate * (now - a.since));
        a.since = now;
      }
      recompute_rates();
      rates_dirty = false;
      flow_next = kInf;
      for (ActiveFlow& a : active_) {
        a.finish = finish_time(a);
        flow_next = std::min(flow_next, a.finish);
      }
    }
    const double queue_next = queue.top_time();
    const double next = std::min(queue_next, flow_next);
    if (next == kInf) break;
    now = next;
    for (double at = queue_next; at <= now; at = queue.top_time()) {
      const TaskId id = queue.pop();
      Task& t = T[id];
      if (t.slot == kReserved) {
        unreserve(t);
        completed[n_completed++] = id;
        continue;
      }
      // Its work on the processor is over: it leaves the processor, and one without a tail (whose
      // tail holds its unslowed time) waits out its unslowed time before its flows.
      if (t.slot >= 0) {
        auto& run = PR[t.processor].running;
        const Running last = run.back();
        run[t.slot] = last;
        T[last.task].slot = t.slot;
        run.pop_back();
        t.slot = -1;
        if (t.tail < 0 && unslowed_[id] > 0) {
          queue.schedule(id, now + unslowed_[id]);
          continue;
        }
      }
      after_fixed(id);
    }
    if (now < flow_next) continue;
    // Flows that have delivered their bytes (relative tolerance against rounding), or whose rest
    // would finish within the clock's resolution.
    std::size_t w = 0;
    flow_next = kInf;
    for (std::size_t ai = 0; ai < active_.size(); ++ai) {
      const ActiveFlow& a = active_[ai];
      const Flow& fl = F[a.flow];
      const double left = a.rate == kInf ? 0.0 : a.remaining - a.rate * (now - a.since);
      if (left <= 1e-9 * fl.bytes + 1e-9 || a.finish <= now) {
        if (--T[a.task].flows_left == 0) completed[n_completed++] = a.task;
        // Others speed up only if they shared a link with this flow.
        for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p)
          if (--LU[PATH[p]] > 0) rates_dirty = true;
      } else {
        if (w != ai) active_[w] = a;
        flow_next = std::min(flow_next, a.finish);
        ++w;
      }
    }
    active_.resize(w);
  }
  order_.resize(n_order);
  events_ = n_order;
  makespan_ = now;
  if (n_order != n) throw std::logic_error("task graph has a dependency cycle or an unreachable task");
}

}  // namespace trainsim::sim
