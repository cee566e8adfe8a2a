#pragma once
// A generic discrete-event engine: tasks with dependencies, in-order streams, and links shared by
// flows. It advances a clock over task completions; it knows nothing of what the tasks mean.
//
// Time-advance contract: every piece of work is either a fixed duration (analytic backend: its
// completion is known when it starts) or a set of flows over links (flow-level backend: completion
// depends on the rates that max-min fair sharing gives every active flow, recomputed whenever a
// flow starts or ends). A task may have both: a fixed latency first, then its flows. Flows that
// can never be shared (every link of theirs is crossed only by one sequence's tasks, which run one
// at a time) take their bottleneck's rate throughout, so such a task ends at a single event: its
// fixed work's end plus that tail. A task's lone flow that finds its links idle is timed the same
// way until another flow needs one of them. A task's unslowed time follows its fixed work (a
// processor's speed change leaves it alone) and precedes its flows.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "event_queue.h"

namespace trainsim::sim {

using TaskId = std::int32_t;
using StreamId = std::int32_t;
using LinkId = std::int32_t;
using ProcessorId = std::int32_t;

struct TaskSpec {
  StreamId stream = -1;      // in-order executor; -1 runs as soon as its dependencies are done
  double duration_s = 0;     // fixed work (or fixed latency before the task's flows start)
  // Fixed time after the fixed work, before the flows, that the processor's speed does not
  // stretch (the latencies of communication fused into a compute task); without a processor it
  // simply adds to duration_s.
  double unslowed_s = 0;
  std::int32_t label = 0;    // caller's name index, for traces
  std::int16_t category = 0; // caller's category, for breakdowns
  std::int32_t lane = 0;     // caller's grouping (rank), for traces and breakdowns
  ProcessorId processor = -1;  // the fixed work runs on this processor, at its current speed
  // The caller runs the tasks of one sequence one at a time (each waits, directly or not, for the
  // one before; run() throws std::logic_error if two overlap). A link crossed only by flows of one
  // sequence's tasks is never shared, so those flows always take their path's bottleneck rate:
  // the engine times such a task's flows as a fixed tail after its fixed work. -1: none.
  std::int32_t sequence = -1;
};

struct Flow {
  double bytes = 0;
  std::int32_t path_begin = 0, path_end = 0;  // range in the engine's path storage
  double lone_Bps = 0;  // its rate alone on its path: the bottleneck's capacity (infinite if empty)
};

class Engine {
 public:
  StreamId add_stream();
  LinkId add_link(double capacity_Bps);
  // A link that stands for `base` as crossed by one of every `k` flows a flow stands for: a flow
  // on it loads `base` at 1/k of its rate (max-min shares are taken of base's capacity with each
  // such flow counted as 1/k), so alone on it a flow runs at k times base's capacity. For a
  // representative flow of which only some of the flows it stands for cross a shared link.
  LinkId add_fractional_link(LinkId base, int k);
  // A processor runs the fixed work of its tasks at speed 1, or at 1/(1 + slowdown) while any task
  // interfering with it is running (a GEMM sharing its GPU with communication kernels).
  ProcessorId add_processor();
  // While `task` runs (from its start to its finish), `p` is slowed by `slowdown` (the largest
  // slowdown among its running interferers applies).
  void add_interference(TaskId task, ProcessorId p, double slowdown) {
    if (p < 0 || p >= static_cast<ProcessorId>(processor_count_)) throw std::invalid_argument("unknown processor");
    if (!(slowdown >= 0)) throw std::invalid_argument("slowdown must not be negative");
    if (ran_) throw std::logic_error("interference added to a graph after it ran");
    Task& t = tasks_[task];
    if (t.interf_end != static_cast<std::int32_t>(interf_.size()))
      throw std::logic_error("interference of a task must be added together, right after its flows");
    interf_.push_back({p, slowdown, 1.0 / (1.0 + slowdown)});
    t.interf_end = static_cast<std::int32_t>(interf_.size());
  }
  [[gnu::always_inline]] TaskId add_task(const TaskSpec& spec) {
    check(spec);
    const TaskId id = static_cast<TaskId>(tasks_.size());
    const std::int32_t f = static_cast<std::int32_t>(flows_.size()), i = static_cast<std::int32_t>(interf_.size());
    tasks_.emplace_back(spec, f, f, i, i);
    unslowed_.emplace_back();
    shares_.push_back(-1);
    waits_.push_back(0);
    set_times(id, spec.processor, spec.duration_s, spec.unslowed_s);
    specs_.push_back(spec);
    if (spec.sequence >= sequences_) sequences_ = spec.sequence + 1;
    if (spec.stream >= 0) order_on_stream(spec.stream, id);
    return id;
  }
  // A task with the flows and the interference of the earlier task `like` (the same bytes over the
  // same links, slowing the same processors), which share them instead of storing them again.
  [[gnu::always_inline]] TaskId add_task(const TaskSpec& spec, TaskId like) {
    check(spec);
    const Task& l = tasks_[like];
    const std::int32_t fb = l.flows_begin, fe = l.flows_end, ib = l.interf_begin, ie = l.interf_end;
    const TaskId id = static_cast<TaskId>(tasks_.size());
    const std::int32_t like_sequence = l.sequence;
    tasks_.emplace_back(spec, fb, fe, ib, ie);  // may move `l`
    unslowed_.emplace_back();
    shares_.push_back(like);
    waits_.push_back(0);
    set_times(id, spec.processor, spec.duration_s, spec.unslowed_s);
    specs_.push_back(spec);
    if (spec.sequence != like_sequence)
      for (std::int32_t f = fb; f < fe; ++f) mark_links(flows_[f], -1);
    if (spec.sequence >= sequences_) sequences_ = spec.sequence + 1;
    if (spec.stream >= 0) order_on_stream(spec.stream, id);
    return id;
  }
  // `before` must finish before `after` starts. Tasks on one stream are also ordered by creation.
  [[gnu::always_inline]] void add_dependency(TaskId before, TaskId after) {
    if (ran_) throw std::logic_error("dependencies added to a graph after it ran");
    Task& b = tasks_[before];
    edges_.push_back({after, b.succ_head});
    b.succ_head = static_cast<std::int32_t>(edges_.size() - 1);
    waits_[after]++;
  }
  // Adds a flow of `bytes` over `path` (links crossed in order) to `task`.
  void add_flow(TaskId task, double bytes, const LinkId* path, int path_len) {
    Task& t = tasks_[task];
    if (ran_) throw std::logic_error("flows added to a graph after it ran");
    if (!(bytes >= 0)) throw std::invalid_argument("flow bytes must be a number, not negative");
    if (t.flows_end != static_cast<std::int32_t>(flows_.size()))
      throw std::logic_error("flows of a task must be added together, right after the task");
    Flow f;
    f.bytes = bytes;
    f.path_begin = static_cast<std::int32_t>(paths_.size());
    f.lone_Bps = std::numeric_limits<double>::infinity();
    for (int i = 0; i < path_len; ++i) {
      // Paths hold base links; a fractional link's divisor goes beside them (kept only once a
      // fractional link is used, so that runs without any pay nothing for them).
      const LinkId base = link_base_[path[i]];
      const std::int32_t k = link_div_[path[i]];
      f.lone_Bps = std::min(f.lone_Bps, link_capacity_[base] * k);
      if (k != 1 && !fractional_) {
        path_div_.assign(paths_.size(), 1);
        fractional_ = true;
      }
      paths_.push_back(base);
      if (fractional_) path_div_.push_back(k);
    }
    f.path_end = static_cast<std::int32_t>(paths_.size());
    mark_links(f, t.sequence);
    flows_.push_back(f);
    t.flows_end = static_cast<std::int32_t>(flows_.size());
  }

  // Runs to completion. Throws std::logic_error if the dependencies contain a cycle. May be called
  // again on the same graph (after respec / set_flow_bytes), which runs it afresh.
  void run();

  // New numbers for a built graph: a task's fixed duration, unslowed time and category, the bytes
  // of its k-th own flow (shared with the tasks made like it).
  void respec(TaskId t, double duration_s, double unslowed_s, std::int16_t category) {
    if (!(duration_s >= 0) || !(unslowed_s >= 0)) throw std::invalid_argument("task duration must be a number, not negative");
    const double unslowed_before = unslowed_[t];
    set_times(t, specs_[t].processor, duration_s, unslowed_s);
    if (unslowed_[t] != unslowed_before && tasks_[t].sequence >= 0) tails_valid_ = false;  // a tail holds it
    specs_[t].duration_s = duration_s;
    specs_[t].unslowed_s = unslowed_s;
    specs_[t].category = category;
  }
  int flow_count(TaskId t) const { return tasks_[t].flows_end - tasks_[t].flows_begin; }
  void set_flow_bytes(TaskId t, int k, double bytes) {
    if (!(bytes >= 0)) throw std::invalid_argument("flow bytes must be a number, not negative");
    double& b = flows_[tasks_[t].flows_begin + k].bytes;
    if (b == bytes) return;
    b = bytes;
    if (tasks_[t].sequence >= 0) tails_valid_ = false;  // only a task of a sequence has a tail
  }

  // The task's time with nothing in its way: its fixed work at full speed, its unslowed time, and
  // its slowest flow alone at its path's bottleneck. What it took beyond that (finish - start) went
  // to sharing: its processor slowed by tasks beside it, its links shared with other flows.
  double uncontended_s(TaskId t) const {
    double flows = 0;
    for (std::int32_t f = tasks_[t].flows_begin; f < tasks_[t].flows_end; ++f)
      if (flows_[f].lone_Bps != std::numeric_limits<double>::infinity()) flows = std::max(flows, flows_[f].bytes / flows_[f].lone_Bps);
    return specs_[t].duration_s + specs_[t].unslowed_s + flows;
  }
  double start(TaskId t) const { return start_[t]; }
  double finish(TaskId t) const { return finish_[t]; }
  // Calls f(s) for every task s that waits for `t` (its dependants, stream order included).
  template <class F>
  void for_each_successor(TaskId t, F&& f) const {
    for (std::int32_t e = tasks_[t].succ_head; e >= 0; e = edges_[e].next) f(edges_[e].to);
  }
  // Every task in the order run() completed them: each after every task it waits for (after a run
  // that threw, the tasks it had completed).
  const std::vector<TaskId>& completion_order() const { return order_; }
  // The dependency whose completion let `t` start (-1 if it started at time zero).
  TaskId binding_predecessor(TaskId t) const { return binding_[t]; }
  const TaskSpec& spec(TaskId t) const { return specs_[t]; }
  std::size_t task_count() const { return tasks_.size(); }
  std::size_t link_count() const { return link_capacity_.size(); }
  double makespan() const { return makespan_; }
  std::uint64_t events_processed() const { return events_; }
  std::uint64_t rate_updates() const { return rate_updates_; }

  void reserve(std::size_t tasks, std::size_t edges);
  // Back to an empty engine (no streams, links, processors or tasks), keeping the memory it has,
  // so that one engine can run many simulations without allocating again.
  void reset();

 private:
  // What run() reads and keeps up to date, one 64-byte record a task: what add_task and its
  // companions set, then the state run() gives every task when it starts, left uninitialized until
  // then, so that adding a task writes only the first part. What run() reads rarely or writes once
  // (the unslowed time, the task shared, start, finish, binding) and the state of fixed work on a
  // processor (Engine::Running) are kept apart, so that a step's records stay in cache.
  struct alignas(64) Task {
    Task(const TaskSpec& s, std::int32_t fb, std::int32_t fe, std::int32_t ib, std::int32_t ie)
        : duration(s.duration_s), succ_head(-1), flows_begin(fb), flows_end(fe), interf_begin(ib), interf_end(ie),
          processor(s.processor), sequence(s.sequence) {}
    double duration;  // spec.duration_s, plus spec.unslowed_s where set_times folds it in
    // A task whose every flow crosses only links of its own sequence: the time its flows take
    // after its fixed work (-1 otherwise); after work on a processor, the unslowed time first.
    double tail;
    // When its fixed work ends (on a processor, at the processor's speed as of its last change);
    // a reserved task's latency end (below).
    double work_end;
    std::int32_t pending;  // unfinished dependencies, counted down by run() from waits_
    std::int32_t succ_head;
    std::int32_t flows_begin, flows_end;    // range in flows_
    std::int32_t interf_begin, interf_end;  // range in interf_
    ProcessorId processor;  // spec.processor while the task has work on it (set_times), else -1
    std::int32_t sequence;  // spec.sequence

    std::int32_t flows_left;
    // Where its fixed work runs: its place in its processor's `running` (>= 0); kReserved for a
    // task whose one flow found its links idle when it started: its completion is queued at its
    // latency's end (work_end) plus the flow's time alone at its bottleneck's rate, until another
    // flow needs one of its links (Engine::run); else -1.
    std::int32_t slot;
  };
  static_assert(sizeof(Task) == 64, "a task's record is one cache line");
  static constexpr std::int32_t kReserved = -2;
  // The unslowed time is kept apart only after work on processor p; without such work (no
  // processor, or none of the task's time on it) the task keeps no processor and the unslowed time
  // is more fixed latency, and run() never reads it.
  void set_times(TaskId id, ProcessorId p, double d, double u) {
    Task& t = tasks_[id];
    if (p >= 0 && d > 0) {
      t.processor = p;
      t.duration = d;
      unslowed_[id] = u;
    } else {
      t.processor = -1;
      t.duration = d + u;
      unslowed_[id] = 0;
    }
  }
  struct Interference {
    ProcessorId processor;
    double slowdown;
    double rate;  // the processor's speed while this is the largest slowdown: 1/(1 + slowdown)
  };
  struct Edge {
    TaskId to;
    std::int32_t next;
  };
  void check(const TaskSpec& spec) const {
    if (!(spec.duration_s >= 0) || !(spec.unslowed_s >= 0)) throw std::invalid_argument("task duration must be a number, not negative");
    if (spec.processor >= static_cast<ProcessorId>(processor_count_)) throw std::invalid_argument("unknown processor");
    if (spec.stream >= static_cast<StreamId>(stream_last_.size())) throw std::out_of_range("unknown stream");
    if (spec.sequence < -1) throw std::invalid_argument("a task's sequence is a number from 0, or -1 for none");
  }
  // Records that a flow of a task of `sequence` crosses the links of `f`.
  void mark_links(const Flow& f, std::int32_t sequence) {
    const std::int32_t seq = sequence >= 0 ? sequence : -1;
    for (std::int32_t p = f.path_begin; p < f.path_end; ++p) {
      std::int32_t& owner = link_sequence_[paths_[p]];
      owner = owner == kNoFlow || owner == seq ? seq : -1;
    }
  }
  void order_on_stream(StreamId s, TaskId id) {
    TaskId& last = stream_last_[s];
    if (last >= 0) add_dependency(last, id);
    last = id;
  }
  void recompute_rates();
  // Gives a tail to every task whose flows cross only links of its own sequence (tail_tasks_ are the
  // candidates; every other task's tail is -1).
  void find_tails();

  std::vector<Task> tasks_;
  std::vector<double> unslowed_;  // by task: spec.unslowed_s after work on a processor (set_times)
  std::vector<TaskId> shares_;    // by task: the earlier task whose flows it shares, or -1
  std::vector<std::int32_t> waits_;  // by task: how many tasks it waits for (add_dependency)
  std::vector<double> start_, finish_;  // by task, as run() timed it
  std::vector<TaskId> binding_;         // by task: binding_predecessor
  std::vector<TaskSpec> specs_;
  std::vector<Edge> edges_;
  std::vector<TaskId> stream_last_;     // last task created on each stream
  std::int32_t sequences_ = 0;          // one more than the largest sequence of a task
  std::vector<double> link_capacity_;
  // By link: the link whose capacity it uses (itself but for a fractional link) and its divisor.
  std::vector<LinkId> link_base_;
  std::vector<std::int32_t> link_div_;
  std::vector<LinkId> paths_;  // base links
  // Beside paths_, once a flow crosses a fractional link (`fractional_`), the divisor of the link
  // each entry was given as; empty before.
  std::vector<std::int32_t> path_div_;
  bool fractional_ = false;

  std::vector<Flow> flows_;
  // Active flows and their state.
  struct ActiveFlow {
    std::int32_t flow = 0;
    TaskId task = 0;
    double remaining = 0, since = 0;  // bytes left as of time `since`
    double rate = 0;                  // current rate (infinite on an empty path)
    double finish = 0;                // when it ends at that rate
  };
  std::vector<ActiveFlow> active_;
  double makespan_ = 0;
  std::uint64_t events_ = 0, rate_updates_ = 0;
  // scratch for max-min
  std::vector<double> cap_left_;
  std::vector<std::int32_t> unfrozen_on_link_;
  std::vector<double> unfrozen_weight_;  // with fractional links: the unfrozen flows' sum of 1/k
  std::vector<char> frozen_;
  std::vector<std::int32_t> link_slot_, offset_, fill_, members_;
  std::vector<LinkId> touched_;
  // recompute_rates() scans for the most constrained link among at most this many links, and keeps
  // a heap of (share, position in touched_) among more. Both pick the same link, so the number
  // changes the speed only, never a rate: a symmetric step's few links stay with the scan, a full
  // step's hundreds go to the heap (not tuned between those).
  static constexpr std::size_t kScanLinks = 32;
  std::vector<std::pair<double, std::int32_t>> share_heap_;
  // By link: how many active flows cross it, or -1 - t where reserved task t's flow crosses it.
  std::vector<std::int32_t> link_use_;
  // By link: the one sequence whose tasks' flows cross it; -1 for several, or for a task of none.
  static constexpr std::int32_t kNoFlow = -2;  // no flow crosses it
  std::vector<std::int32_t> link_sequence_;
  std::vector<TaskId> sequence_running_;  // the task of each sequence running now (-1 none), from slot 1
  std::vector<Interference> interf_;
  // A task's fixed work on a processor: what is left as of `since`; a speed change of the
  // processor re-keys the task's completion in the event queue.
  struct Running {
    TaskId task;
    double left, since;
  };
  struct Processor {
    // The interfering tasks running now: the largest slowdown among them (0 if none) with how many
    // run at it, and the other slowdowns with their counts (tasks of one profile share one slowdown,
    // so this is usually empty).
    double max_slowdown = 0;
    std::int32_t at_max = 0;
    std::vector<std::pair<double, std::int32_t>> below;
    // Tasks whose fixed work runs on it now (each at the processor's rate, but for a task past its
    // fixed work into its tail).
    std::vector<Running> running;
    double rate = 1.0;  // its speed now, 1/(1 + max_slowdown)
    // Nothing running on it and nothing slowing it, its vectors' memory kept.
    void idle() {
      max_slowdown = 0;
      at_max = 0;
      below.clear();
      running.clear();
      rate = 1.0;
    }
  };
  std::vector<Processor> processors_;  // the first processor_count_ are this run's
  std::size_t processor_count_ = 0;
  EventQueue queue_;
  // run()'s scratch stacks, room for every task, left uninitialized: tasks past their latency,
  // tasks done.
  std::unique_ptr<TaskId[]> ready_, completed_;
  std::size_t stack_capacity_ = 0;
  std::vector<TaskId> order_;              // tasks as run() completed them
  bool ran_ = false;                       // run() has run the graph (it takes no more dependencies)
  std::size_t ran_tasks_ = 0;              // how many tasks it had then
  std::vector<TaskId> roots_;              // tasks that wait for none, in order (from the first run)
  std::vector<TaskId> tail_tasks_;         // tasks of a sequence with flows (from the first run)
  bool tails_valid_ = false;               // their tails are those of the flows' bytes now
};

}  // namespace trainsim::sim
