#include "event_queue.h"

namespace trainsim::sim {

void EventQueue::make_heap() {
  heap_.clear();
  for (std::int32_t i = 0; i < n_; ++i) heap_.push_back(Entry{time_[i], seq_of_[i], task_[i]});
  n_ = 0;
  min_ = -1;
  heap_mode_ = true;
  const std::int32_t n = static_cast<std::int32_t>(heap_.size());
  for (std::int32_t i = n; i-- > 0;) {
    const Entry e = heap_[i];
    down(i, e);
  }
  for (std::int32_t i = 0; i < n; ++i) pos_[heap_[i].task] = i;
}

void EventQueue::heap_put(const Entry& e) {
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

void EventQueue::heap_take(std::int32_t i) {
  pos_[heap_[i].task] = -1;
  const Entry last = heap_.back();
  heap_.pop_back();
  if (i == static_cast<std::int32_t>(heap_.size())) return;
  if (i > 0 && before(last, heap_[(i - 1) / 4])) up(i, last);
  else down(i, last);
}

void EventQueue::up(std::int32_t i, const Entry& e) {
  while (i > 0) {
    const std::int32_t parent = (i - 1) / 4;
    if (!before(e, heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, e);
}

void EventQueue::down(std::int32_t i, const Entry& e) {
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

}  // namespace trainsim::sim
