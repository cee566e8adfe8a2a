// The process-wide pool that searches run on.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "worker_pool.h"

using namespace trainsim;

TEST(WorkerPool, RunsOnAsManyThreadsAsAskedAndWaitsForAll) {
  // Each call must run the job once on each of `n` distinct threads (the caller's among them) and
  // return only after every one has finished. A job that waits until all n have arrived would hang
  // if fewer than n ran at once.
  for (int n : {1, 3, 2, 4}) {
    std::mutex m;
    std::set<std::thread::id> ids;
    std::atomic<int> arrived{0}, finished{0};
    WorkerPool::shared().run(n, [&] {
      {
        std::lock_guard<std::mutex> lock(m);
        ids.insert(std::this_thread::get_id());
      }
      arrived.fetch_add(1);
      while (arrived.load() < n) std::this_thread::yield();
      finished.fetch_add(1);
    });
    EXPECT_EQ(finished.load(), n);
    EXPECT_EQ(static_cast<int>(ids.size()), n);
    EXPECT_TRUE(ids.count(std::this_thread::get_id()));
  }
}

TEST(WorkerPool, AnExceptionOnAPoolThreadReachesTheCaller) {
  std::atomic<int> calls{0};
  auto job = [&] {
    if (calls.fetch_add(1) == 1) throw std::runtime_error("layout 7 failed");
  };
  try {
    WorkerPool::shared().run(3, job);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "layout 7 failed");
  }
  EXPECT_EQ(calls.load(), 3);
  // The pool is still usable afterwards.
  std::atomic<int> again{0};
  WorkerPool::shared().run(3, [&] { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 3);
}

TEST(WorkerPool, RunEachRunsEveryIndexOnceAndRethrowsTheLowestIndexs) {
  // Every index in [0, n) once, whatever the threads (0: one a core; more threads than indices),
  // none for n = 0.
  for (int threads : {0, 1, 3, 16})
    for (std::size_t n : {0u, 1u, 7u, 100u}) {
      std::vector<std::atomic<int>> seen(n);
      WorkerPool::shared().run_each(threads, n, [&](std::size_t i) { seen[i].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << threads << " threads, index " << i << " of " << n;
    }
  // Where several throw, the lowest index's exception, on any number of threads; every index ran.
  for (int threads : {1, 4}) {
    std::atomic<int> ran{0};
    try {
      WorkerPool::shared().run_each(threads, 10, [&](std::size_t i) {
        ran.fetch_add(1);
        if (i == 6 || i == 3 || i == 8) throw std::runtime_error("index " + std::to_string(i));
      });
      ADD_FAILURE() << "nothing thrown";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "index 3") << threads << " threads";
    }
    EXPECT_EQ(ran.load(), 10);
  }
}
