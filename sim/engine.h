#pragma once
// A generic discrete-event engine: tasks with dependencies, in-order streams, and links shared by
// flows. It advances a clock over task completions; it knows nothing of what the tasks mean.
//
// Time-advance contract: every piece of work is either a fixed duration (analytic backend: its
// completion is known when it starts) or a set of flows over links (flow-level backend: completion
// depends on the rates that max-min fair sharing gives every active flow, recomputed whenever a
// flow starts or ends). A task may have both: a fixed latency first, then its flows.
#include <cstdint>
#include <string>
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
  std::int32_t label = 0;    // caller's name index, for traces
  std::int16_t category = 0; // caller's category, for breakdowns
  std::int32_t lane = 0;     // caller's grouping (rank), for traces and breakdowns
  ProcessorId processor = -1;  // the fixed work runs on this processor, at its current speed
};

struct Flow {
  double bytes = 0;
  std::int32_t path_begin = 0, path_end = 0;  // range in the engine's path storage
};

class Engine {
 public:
  StreamId add_stream();
  LinkId add_link(double capacity_Bps);
  // A processor runs the fixed work of its tasks at speed 1, or at 1/(1 + slowdown) while any task
  // interfering with it is running (a GEMM sharing its GPU with communication kernels).
  ProcessorId add_processor();
  // While `task` runs (from its start to its finish), `p` is slowed by `slowdown` (the largest
  // slowdown among its running interferers applies).
  void add_interference(TaskId task, ProcessorId p, double slowdown);
  TaskId add_task(const TaskSpec& spec);
  // `before` must finish before `after` starts. Tasks on one stream are also ordered by creation.
  void add_dependency(TaskId before, TaskId after);
  // Adds a flow of `bytes` over `path` (links crossed in order) to `task`.
  void add_flow(TaskId task, double bytes, const LinkId* path, int path_len);

  // Runs to completion. Throws std::logic_error if the dependencies contain a cycle.
  void run();

  double start(TaskId t) const { return tasks_[t].start; }
  double finish(TaskId t) const { return tasks_[t].finish; }
  // The dependency whose completion let `t` start (-1 if it started at time zero).
  TaskId binding_predecessor(TaskId t) const { return tasks_[t].binding; }
  const TaskSpec& spec(TaskId t) const { return tasks_[t].spec; }
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
  struct Task {
    TaskSpec spec;
    std::int32_t pending = 0;  // unfinished dependencies
    std::int32_t flows_begin = 0, flows_end = 0;
    std::int32_t flows_left = 0;
    std::int32_t succ_head = -1;
    TaskId binding = -1;
    double ready_at = 0;
    double start = -1, finish = -1;
    std::int32_t interf_begin = 0, interf_end = 0;  // range in interf_
    // Fixed work on a processor: what is left as of work_since, at work_rate; a speed change
    // re-keys the task's completion in the event queue.
    double work_left = 0, work_since = 0, work_rate = 1;
    std::int32_t proc_slot = -1;
  };
  struct Interference {
    ProcessorId processor;
    double slowdown;
  };
  struct Edge {
    TaskId to;
    std::int32_t next;
  };
  void on_ready(TaskId t, double now);
  void begin(TaskId t, double now);
  void complete(TaskId t, double now);
  void start_flows(TaskId t, double now);
  void recompute_rates();

  std::vector<Task> tasks_;
  std::vector<Edge> edges_;
  std::vector<TaskId> stream_last_;     // last task created on each stream
  std::vector<TaskId> stream_tail_;     // per stream: last task that started (for ordering)
  std::vector<double> link_capacity_;
  std::vector<LinkId> paths_;
  std::vector<Flow> flows_;
  std::vector<TaskId> flow_task_;
  // Active flows and their state.
  struct ActiveFlow {
    std::int32_t flow = 0;
    double remaining = 0, since = 0;  // bytes left as of time `since`
    double rate = 0;                  // current rate (infinite on an empty path)
    double finish = 0;                // when it ends at that rate
  };
  std::vector<ActiveFlow> active_;
  double makespan_ = 0;
  std::uint64_t events_ = 0, rate_updates_ = 0;
  std::vector<std::int32_t> pending_flow_tasks_;  // tasks whose flows start after their latency
  // scratch for max-min
  std::vector<double> cap_left_;
  std::vector<std::int32_t> unfrozen_on_link_;
  std::vector<char> frozen_;
  std::vector<std::int32_t> link_slot_, offset_, fill_, members_;
  std::vector<LinkId> touched_;
  std::vector<std::int32_t> link_flows_;  // active flows crossing each link
  std::vector<Interference> interf_;
  struct Processor {
    std::vector<double> active_slowdowns;  // of the interfering tasks running now
    std::vector<TaskId> running;           // tasks whose fixed work runs on it now
    double max_slowdown = 0;               // the largest of active_slowdowns (0 if none)
    double rate = 1.0;                     // its speed now, 1/(1 + max_slowdown); every running task's work_rate
  };
  std::vector<Processor> processors_;  // the first processor_count_ are this run's
  std::size_t processor_count_ = 0;
  EventQueue queue_;
  std::vector<TaskId> ready_, completed_;  // run()'s scratch: tasks past their latency, tasks done
};

}  // namespace trainsim::sim
