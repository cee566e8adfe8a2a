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

}  // namespace trainsim::sim
