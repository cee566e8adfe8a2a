#pragma once
// The engine's pending completions, earliest first: an indexed 4-ary min-heap of tasks keyed by
// (time, order of scheduling). A task has at most one entry, so a completion that moves (its
// processor changed speed) is re-keyed in place rather than leaving a stale entry to pop later.
#include <cstdint>
#include <vector>

namespace trainsim::sim {

class EventQueue {
 public:
  // Empties the queue for tasks numbered 0 .. tasks-1, keeping its memory.
  void clear(std::size_t tasks) {
    heap_.clear();
    pos_.assign(tasks, -1);
    seq_ = 0;
  }
  bool empty() const { return heap_.empty(); }
  double top_time() const { return heap_.front().time; }

  // Schedules `task` at `time`, or moves it there if it is queued already. Equal times come out in
  // the order they were (re)scheduled.
  void schedule(std::int32_t task, double time) {
    const Entry e{time, seq_++, task};
    std::int32_t i = pos_[task];
    if (i < 0) {
      i = static_cast<std::int32_t>(heap_.size());
      heap_.push_back(e);
      up(i, e);
    } else if (before(e, heap_[i])) {
      up(i, e);
    } else {
      down(i, e);
    }
  }

  std::int32_t pop() {
    const std::int32_t task = heap_.front().task;
    pos_[task] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) down(0, last);
    return task;
  }

 private:
  struct Entry {
    double time;
    std::uint64_t seq;
    std::int32_t task;
  };
  static bool before(const Entry& a, const Entry& b) { return a.time != b.time ? a.time < b.time : a.seq < b.seq; }
  void place(std::int32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.task] = i;
  }
  // Moves `e`, destined for slot i, towards the root while it comes before its parent.
  void up(std::int32_t i, const Entry& e) {
    while (i > 0) {
      const std::int32_t parent = (i - 1) / 4;
      if (!before(e, heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, e);
  }
  // Moves `e`, destined for slot i, towards the leaves while a child comes before it.
  void down(std::int32_t i, const Entry& e) {
    const std::int32_t n = static_cast<std::int32_t>(heap_.size());
    while (true) {
      const std::int32_t first = 4 * i + 1;
      if (first >= n) break;
      std::int32_t best = first;
      const std::int32_t end = first + 4 < n ? first + 4 : n;
      for (std::int32_t c = first + 1; c < end; ++c)
        if (before(heap_[c], heap_[best])) best = c;
      if (!before(heap_[best], e)) break;
      place(i, heap_[best]);
      i = best;
    }
    place(i, e);
  }

  std::vector<Entry> heap_;
  std::vector<std::int32_t> pos_;  // each task's slot in heap_, -1 when not queued
  std::uint64_t seq_ = 0;
};

}  // namespace trainsim::sim
