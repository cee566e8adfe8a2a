// The engine's event queue: earliest first, ties in scheduling order, completions re-keyed in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "event_queue.h"

using trainsim::sim::EventQueue;

namespace {

// Pops everything, earliest first.
std::vector<int> drain(EventQueue& q) {
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.pop());
  return order;
}

}  // namespace

TEST(EventQueue, PopsEarliestFirstAndTiesInSchedulingOrder) {
  EventQueue q;
  q.clear(6);
  q.schedule(3, 2.0);
  q.schedule(1, 1.0);
  q.schedule(4, 1.0);
  q.schedule(0, 3.0);
  q.schedule(2, 1.0);
  EXPECT_EQ(drain(q), (std::vector<int>{1, 4, 2, 3, 0}));
}

TEST(EventQueue, RescheduledTaskMovesAndLeavesNoStaleEntry) {
  EventQueue q;
  q.clear(4);
  q.schedule(0, 5.0);
  q.schedule(1, 2.0);
  q.schedule(2, 3.0);
  q.schedule(0, 1.0);  // earlier
  q.schedule(1, 4.0);  // later
  q.schedule(2, 3.0);  // same time, now scheduled after task 0's and 1's moves
  EXPECT_EQ(q.top_time(), 1.0);
  EXPECT_EQ(drain(q), (std::vector<int>{0, 2, 1}));
}

TEST(EventQueue, AnEmptyQueuesEarliestTimeIsInfinityAsAnArrayAndAsAHeap) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (int tasks : {3, 40}) {  // 40 entries turn it into a heap
    EventQueue q;
    q.clear(tasks);
    EXPECT_EQ(q.top_time(), kInf);
    for (int t = 0; t < tasks; ++t) q.schedule(t, 1.0 + t);
    EXPECT_EQ(q.top_time(), 1.0);
    EXPECT_EQ(drain(q).size(), static_cast<std::size_t>(tasks));
    EXPECT_EQ(q.top_time(), kInf) << tasks;
  }
}

TEST(EventQueue, AMoveKeepsItsPlaceAmongEqualTimesAndARemovedTaskIsGone) {
  EventQueue q;
  q.clear(5);
  q.schedule(0, 4.0);
  q.schedule(1, 2.0);
  q.schedule(2, 2.0);
  q.schedule(3, 3.0);
  q.move_keeping_order(0, 2.0);  // scheduled first: ahead of 1 and 2 at 2.0
  q.remove(3);
  EXPECT_FALSE(q.queued(3));
  EXPECT_TRUE(q.queued(0));
  EXPECT_EQ(drain(q), (std::vector<int>{0, 1, 2}));
}

namespace {

// Random operations on `tasks` tasks against a reference that keeps (time, order of last
// scheduling) per queued task and takes the smallest: schedules and pops, and with `moves` also
// moves that keep their order and removals. Few distinct times, so that ties are common.
void check_against_reference(int tasks, bool moves, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> task(0, tasks - 1), coin(0, 5);
  std::uniform_real_distribution<double> when(0.0, 100.0);
  EventQueue q;
  q.clear(tasks);
  struct Ref {
    bool queued = false;
    double time = 0;
    long order = 0;
  };
  std::vector<Ref> ref(tasks);
  long seq = 0;
  for (int step = 0; step < 20000; ++step) {
    const int c = moves ? coin(rng) : 2 + coin(rng) % 3, t = task(rng);
    const double at = static_cast<int>(when(rng)) / 10.0;
    if (c == 0 && ref[t].queued) {
      q.move_keeping_order(t, at);
      ref[t].time = at;
    } else if (c == 1 && ref[t].queued) {
      q.remove(t);
      ref[t].queued = false;
    } else if (c <= 3 || q.empty()) {
      q.schedule(t, at);
      ref[t] = {true, at, seq++};
    } else {
      const auto best = std::min_element(ref.begin(), ref.end(), [](const Ref& a, const Ref& b) {
        if (a.queued != b.queued) return a.queued;
        return a.time != b.time ? a.time < b.time : a.order < b.order;
      });
      ASSERT_EQ(q.top_time(), best->time) << tasks;
      ASSERT_EQ(q.pop(), static_cast<int>(best - ref.begin())) << tasks;
      best->queued = false;
    }
    if (moves) {
      for (int k = 0; k < tasks; ++k) ASSERT_EQ(q.queued(k), ref[k].queued) << tasks;
    }
  }
}

}  // namespace

TEST(EventQueue, MatchesASortedReferenceUnderRandomReschedules) {
  // Random schedules, reschedules and pops over 200 tasks (the queue turns into a heap part way).
  check_against_reference(200, false, 7);
}

TEST(EventQueue, MovesAndRemovesMatchTheReferenceAcrossEveryQueueSize) {
  // Few tasks (the queue stays an array) and many (it turns into a heap part way), with moves that
  // keep their order and removals mixed in.
  for (int tasks : {6, 31, 33, 300}) check_against_reference(tasks, true, 11 + static_cast<unsigned>(tasks));
}
