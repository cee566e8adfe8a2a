#pragma once
// The engine's pending completions, earliest first, keyed by (time, order of scheduling). A task has
// at most one entry, so a completion that moves (its processor changed speed) is re-keyed in place
// rather than leaving a stale entry to pop later.
//
// A symmetric-mode step keeps a handful of completions pending at once (a few per simulated GPU),
// a full-mode one thousands. While at most kSmall are pending they sit unsorted in a fixed array:
// scheduling and re-keying are a store, and the earliest is found by a scan when asked for (and
// kept until it is popped or moved later). Past kSmall entries they become an indexed 4-ary
// min-heap for the rest of the run.
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

namespace trainsim::sim {

class EventQueue {
 public:
  // Empties the queue for tasks numbered 0 .. tasks-1, keeping its memory.
  void clear(std::size_t tasks) {
    n_ = 0;
    heap_.clear();
    pos_.assign(tasks, -1);
    seq_ = 0;
    heap_mode_ = false;
    min_ = -1;
  }
  bool empty() const { return heap_mode_ ? heap_.empty() : n_ == 0; }
  // The earliest entry's time; +infinity when the queue is empty.
  double top_time() {
    if (heap_mode_) return heap_.empty() ? std::numeric_limits<double>::infinity() : heap_.front().time;
    if (min_ < 0) {
      if (n_ == 0) return std::numeric_limits<double>::infinity();
      find_min();
    }
    return time_[min_];
  }
  bool queued(std::int32_t task) const { return pos_[task] >= 0; }

  // Schedules `task` at `time`, or moves it there if it is queued already. Equal times come out in
  // the order they were (re)scheduled.
  [[gnu::always_inline]] void schedule(std::int32_t task, double time) { put(task, time, seq_++); }

  // Moves queued `task` to `time`, keeping its place among equal times (the order it was last
  // scheduled in), as if it had been scheduled at `time` then.
  void move_keeping_order(std::int32_t task, double time) {
    put(task, time, heap_mode_ ? heap_[pos_[task]].seq : seq_of_[pos_[task]]);
  }

  // Takes queued `task` out of the queue.
  void remove(std::int32_t task) {
    if (heap_mode_) return heap_take(pos_[task]);
    small_take(pos_[task]);
  }

  // Takes the earliest entry out and returns its task.
  std::int32_t pop() {
    if (heap_mode_) {
      const std::int32_t task = heap_.front().task;
      heap_take(0);
      return task;
    }
    if (min_ < 0) find_min();
    const std::int32_t task = task_[min_];
    small_take(min_);
    return task;
  }

 private:
  static constexpr std::int32_t kSmall = 32;
  struct Entry {
    double time;
    std::uint64_t seq;
    std::int32_t task;
  };
  static bool before(const Entry& a, const Entry& b) { return a.time != b.time ? a.time < b.time : a.seq < b.seq; }

  [[gnu::always_inline]] void put(std::int32_t task, double time, std::uint64_t seq) {
    if (heap_mode_) return heap_put(Entry{time, seq, task});
    std::int32_t i = pos_[task];
    if (i < 0) {
      if (n_ == kSmall) {
        make_heap();
        return heap_put(Entry{time, seq, task});
      }
      i = n_++;
      task_[i] = task;
      pos_[task] = i;
    } else if (i == min_ && (time > time_[i] || (time == time_[i] && seq > seq_of_[i]))) {
      min_ = -1;  // the earliest moved later: find it again when asked
    }
    time_[i] = time;
    seq_of_[i] = seq;
    if (min_ < 0) {
      if (n_ == 1) min_ = 0;
    } else if (time < time_[min_] || (time == time_[min_] && seq < seq_of_[min_])) {
      min_ = i;
    }
  }
  void small_take(std::int32_t i) {
    pos_[task_[i]] = -1;
    const std::int32_t last = --n_;
    if (i != last) {
      time_[i] = time_[last];
      seq_of_[i] = seq_of_[last];
      task_[i] = task_[last];
      pos_[task_[i]] = i;
    }
    if (min_ == i) min_ = -1;
    else if (min_ == last) min_ = i;
  }
  void find_min() {
    std::int32_t best = 0;
#if defined(__SIZEOF_INT128__)
    // Times are never negative, so their bits order as they do; with the order of scheduling
    // below them, one unsigned comparison a slot picks the earliest, with no branch to mispredict.
    using Key = unsigned __int128;
    auto key = [this](std::int32_t i) { return static_cast<Key>(std::bit_cast<std::uint64_t>(time_[i] + 0.0)) << 64 | seq_of_[i]; };
    Key bk = key(0);
    for (std::int32_t i = 1; i < n_; ++i) {
      const Key k = key(i);
      const bool earlier = k < bk;
      best = earlier ? i : best;
      bk = earlier ? k : bk;
    }
#else
    // Without a 128-bit integer: time first, the order of scheduling only on a tie.
    double bt = time_[0];
    for (std::int32_t i = 1; i < n_; ++i) {
      const double t = time_[i];
      if (t <= bt && (t < bt || seq_of_[i] < seq_of_[best])) best = i, bt = t;
    }
#endif
    min_ = best;
  }
  void make_heap();  // out of line: once a run at most
  void heap_put(const Entry& e) {
    std::int32_t i = pos_[e.task];
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
  void heap_take(std::int32_t i) {
    pos_[heap_[i].task] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == static_cast<std::int32_t>(heap_.size())) return;
    if (i > 0 && before(last, heap_[(i - 1) / 4])) up(i, last);
    else down(i, last);
  }
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

  // Small mode: n_ entries, unsorted; min_ the slot of the earliest, -1 when not known.
  double time_[kSmall];
  std::uint64_t seq_of_[kSmall];
  std::int32_t task_[kSmall];
  std::int32_t n_ = 0, min_ = -1;
  std::vector<Entry> heap_;        // heap mode
  std::vector<std::int32_t> pos_;  // each task's slot (in the small arrays or heap_), -1 when not queued
  std::uint64_t seq_ = 0;
  bool heap_mode_ = false;
};

}  // namespace trainsim::sim
