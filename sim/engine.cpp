#include "engine.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace trainsim::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

void Engine::reserve(std::size_t tasks, std::size_t edges) {
  tasks_.reserve(tasks);
  edges_.reserve(edges);
}

void Engine::reset() {
  tasks_.clear();
  edges_.clear();
  stream_last_.clear();
  link_capacity_.clear();
  link_sequence_.clear();
  paths_.clear();
  flows_.clear();
  active_.clear();
  makespan_ = 0;
  events_ = rate_updates_ = 0;
  cap_left_.clear();
  unfrozen_on_link_.clear();
  frozen_.clear();
  link_slot_.clear();
  offset_.clear();
  fill_.clear();
  members_.clear();
  touched_.clear();
  link_flows_.clear();
  interf_.clear();
  processor_count_ = 0;
}

StreamId Engine::add_stream() {
  stream_last_.push_back(-1);
  return static_cast<StreamId>(stream_last_.size() - 1);
}

LinkId Engine::add_link(double capacity_Bps) {
  if (!(capacity_Bps > 0)) throw std::invalid_argument("link capacity must be positive");
  link_capacity_.push_back(capacity_Bps);
  link_sequence_.push_back(kNoFlow);
  return static_cast<LinkId>(link_capacity_.size() - 1);
}

ProcessorId Engine::add_processor() {
  // Slots of earlier runs are reused with their vectors' memory.
  if (processor_count_ == processors_.size()) processors_.emplace_back();
  Processor& p = processors_[processor_count_];
  p.active_slowdowns.clear();
  p.running.clear();
  p.max_slowdown = 0;
  p.at_max = 0;
  p.rate = 1.0;
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
  touched_.clear();
  for (const ActiveFlow& a : active_) {
    const std::int32_t f = a.flow;
    for (std::int32_t p = flows_[f].path_begin; p < flows_[f].path_end; ++p) {
      const LinkId l = paths_[p];
      if (unfrozen_on_link_[l]++ == 0) {
        cap_left_[l] = link_capacity_[l];
        link_slot_[l] = static_cast<std::int32_t>(touched_.size());
        touched_.push_back(l);
      }
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
  while (left > 0) {
    std::size_t best = touched_.size();
    double best_share = kInf;
    for (std::size_t i = 0; i < touched_.size(); ++i) {
      const LinkId l = touched_[i];
      if (unfrozen_on_link_[l] == 0) continue;
      const double share = cap_left_[l] / unfrozen_on_link_[l];
      if (share < best_share) { best_share = share; best = i; }
    }
    if (best == touched_.size()) break;
    for (std::int32_t k = offset_[best]; k < offset_[best + 1]; ++k) {
      const std::int32_t ai = members_[k];
      if (frozen_[ai]) continue;
      frozen_[ai] = 1;
      --left;
      active_[ai].rate = std::max(best_share, 0.0);
      const std::int32_t f = active_[ai].flow;
      for (std::int32_t p = flows_[f].path_begin; p < flows_[f].path_end; ++p) {
        const LinkId l = paths_[p];
        cap_left_[l] -= best_share;
        unfrozen_on_link_[l]--;
      }
    }
  }
  for (LinkId l : touched_) unfrozen_on_link_[l] = 0;
}

void Engine::find_tails() {
  std::int32_t sequences = 0;
  for (Task& t : tasks_) {
    const std::int32_t seq = t.spec.sequence;
    sequences = std::max(sequences, seq + 1);
    t.tail = -1;
    if (seq < 0 || t.flows_end == t.flows_begin) continue;
    // Tasks sharing flows have the same tail when of the same sequence (else their links are
    // marked shared and neither has one).
    if (t.shares >= 0) {
      t.tail = tasks_[t.shares].tail;
      continue;
    }
    // A lone flow takes its bottleneck's capacity (an empty path delivers at once); the task ends
    // with its slowest flow.
    double tail = 0;
    for (std::int32_t f = t.flows_begin; f < t.flows_end && tail >= 0; ++f) {
      const Flow& fl = flows_[f];
      double rate = kInf;
      for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p) {
        if (link_sequence_[paths_[p]] != seq) {
          tail = -1;
          break;
        }
        rate = std::min(rate, link_capacity_[paths_[p]]);
      }
      if (tail >= 0 && rate != kInf) tail = std::max(tail, fl.bytes / rate);
    }
    t.tail = tail;
  }
  sequence_running_.assign(static_cast<std::size_t>(sequences), -1);
}

void Engine::run() {
  EventQueue& heap = queue_;
  heap.clear(tasks_.size());
  double now = 0;
  std::vector<TaskId>& ready = ready_;
  std::vector<TaskId>& completed = completed_;
  ready.clear();
  completed.clear();
  std::size_t done = 0;
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
  auto respeed = [&](Processor& pr) {
    const double rate = 1.0 / (1.0 + pr.max_slowdown);
    if (rate == pr.rate) return;
    pr.rate = rate;
    for (TaskId id : pr.running) {
      Task& t = tasks_[id];
      // A task in its tail has done its fixed work: the processor's speed no longer matters to it.
      if (t.tail >= 0 && now >= t.work_end) continue;
      t.work_left = std::max(0.0, t.work_left - t.work_rate * (now - t.work_since));
      t.work_since = now;
      t.work_rate = rate;
      t.work_end = now + t.work_left / rate;
      heap.schedule(id, t.tail >= 0 ? t.work_end + t.tail : t.work_end);
    }
  };
  // An interferer starts or stops: the processor's largest active slowdown is kept with the number
  // of interferers at it, so that only the last of those to stop rescans the others.
  auto interfere_on = [&](const Task& t) {
    for (std::int32_t i = t.interf_begin; i < t.interf_end; ++i) {
      Processor& pr = processors_[interf_[i].processor];
      const double x = interf_[i].slowdown;
      pr.active_slowdowns.push_back(x);
      if (x > pr.max_slowdown) {
        pr.max_slowdown = x;
        pr.at_max = 1;
        respeed(pr);
      } else if (x == pr.max_slowdown) {
        ++pr.at_max;
      }
    }
  };
  auto interfere_off = [&](const Task& t) {
    for (std::int32_t i = t.interf_begin; i < t.interf_end; ++i) {
      Processor& pr = processors_[interf_[i].processor];
      const double x = interf_[i].slowdown;
      std::vector<double>& act = pr.active_slowdowns;
      for (std::size_t k = 0; k < act.size(); ++k)
        if (act[k] == x) {
          act[k] = act.back();
          act.pop_back();
          break;
        }
      if (x < pr.max_slowdown || --pr.at_max > 0) continue;
      double s = 0;
      std::int32_t n = 0;
      for (double y : act) {
        if (y > s) s = y, n = 0;
        n += y == s;
      }
      pr.at_max = n;
      if (s == pr.max_slowdown) continue;
      pr.max_slowdown = s;
      respeed(pr);
    }
  };
  auto schedule_start = [&](TaskId id) {
    Task& t = tasks_[id];
    t.start = now;
    if (t.spec.sequence >= 0) {
      TaskId& running = sequence_running_[t.spec.sequence];
      if (running >= 0) throw std::logic_error("two tasks of one sequence overlap");
      running = id;
    }
    if (t.interf_end > t.interf_begin) interfere_on(t);
    const double d = t.spec.duration_s;
    // A task with a tail completes at one event, its fixed work's end plus the tail.
    if (d > 0 && t.spec.processor >= 0) {
      Processor& pr = processors_[t.spec.processor];
      t.work_left = d;
      t.work_since = now;
      t.work_rate = pr.rate;
      t.work_end = now + d / pr.rate;
      t.proc_slot = static_cast<std::int32_t>(pr.running.size());
      pr.running.push_back(id);
      heap.schedule(id, t.tail >= 0 ? t.work_end + t.tail : t.work_end);
    } else if (d > 0) {
      t.work_end = now + d;
      heap.schedule(id, t.tail >= 0 ? t.work_end + t.tail : t.work_end);
    } else if (t.tail > 0) {
      heap.schedule(id, now + t.tail);
    } else {
      ready.push_back(id);  // latency phase is empty: go straight to flows or completion
    }
  };
  // The fixed phase of `id` is over: it leaves its processor.
  auto leave_processor = [&](Task& t) {
    if (t.proc_slot < 0) return;
    auto& run = processors_[t.spec.processor].running;
    const TaskId last = run.back();
    run[t.proc_slot] = last;
    tasks_[last].proc_slot = t.proc_slot;
    run.pop_back();
    t.proc_slot = -1;
  };
  // Moves a task past its fixed phase: starts its flows, or completes it.
  auto after_fixed = [&](TaskId id) {
    Task& t = tasks_[id];
    if (t.flows_end == t.flows_begin || t.tail >= 0) {
      completed.push_back(id);
      return;
    }
    t.flows_left = t.flows_end - t.flows_begin;
    for (std::int32_t f = t.flows_begin; f < t.flows_end; ++f)
      for (std::int32_t p = flows_[f].path_begin; p < flows_[f].path_end; ++p) ++link_flows_[paths_[p]];
    for (std::int32_t f = t.flows_begin; f < t.flows_end; ++f) {
      const Flow& fl = flows_[f];
      // A flow alone on every link of its path runs at its bottleneck's capacity (max-min of one
      // flow); anything shared needs the full recomputation.
      double rate = kInf;
      bool alone = true;
      for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p) {
        alone &= link_flows_[paths_[p]] == 1;
        rate = std::min(rate, link_capacity_[paths_[p]]);
      }
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
  auto finish_task = [&](TaskId id) {
    Task& t = tasks_[id];
    t.finish = now;
    if (t.spec.sequence >= 0) sequence_running_[t.spec.sequence] = -1;
    if (t.interf_end > t.interf_begin) interfere_off(t);
    makespan_ = std::max(makespan_, now);
    ++done;
    ++events_;
    for (std::int32_t e = t.succ_head; e >= 0; e = edges_[e].next) {
      const TaskId to = edges_[e].to;
      Task& s = tasks_[to];
      if (--s.pending == 0) {
        s.binding = id;
        schedule_start(to);
      }
    }
  };

  link_flows_.assign(link_capacity_.size(), 0);
  find_tails();
  for (std::size_t i = 0; i < tasks_.size(); ++i)
    if (tasks_[i].pending == 0) schedule_start(static_cast<TaskId>(i));

  while (true) {
    // Settle everything that happens at `now` without time passing.
    while (!ready.empty() || !completed.empty()) {
      while (!ready.empty()) {
        const TaskId id = ready.back();
        ready.pop_back();
        after_fixed(id);
      }
      while (!completed.empty()) {
        const TaskId id = completed.back();
        completed.pop_back();
        finish_task(id);
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
    const double next = std::min(heap.empty() ? kInf : heap.top_time(), flow_next);
    if (next == kInf) break;
    now = next;
    while (!heap.empty() && heap.top_time() <= now) {
      const TaskId id = heap.pop();
      leave_processor(tasks_[id]);
      after_fixed(id);
    }
    if (now < flow_next) continue;
    // Flows that have delivered their bytes (relative tolerance against rounding), or whose rest
    // would finish within the clock's resolution.
    std::size_t w = 0;
    flow_next = kInf;
    for (std::size_t ai = 0; ai < active_.size(); ++ai) {
      const ActiveFlow& a = active_[ai];
      const Flow& fl = flows_[a.flow];
      const double left = a.rate == kInf ? 0.0 : a.remaining - a.rate * (now - a.since);
      if (left <= 1e-9 * fl.bytes + 1e-9 || a.finish <= now) {
        if (--tasks_[a.task].flows_left == 0) completed.push_back(a.task);
        // Others speed up only if they shared a link with this flow.
        for (std::int32_t p = fl.path_begin; p < fl.path_end; ++p)
          if (--link_flows_[paths_[p]] > 0) rates_dirty = true;
      } else {
        if (w != ai) active_[w] = a;
        flow_next = std::min(flow_next, a.finish);
        ++w;
      }
    }
    active_.resize(w);
  }
  if (done != tasks_.size()) throw std::logic_error("task graph has a dependency cycle or an unreachable task");
}

}  // namespace trainsim::sim
