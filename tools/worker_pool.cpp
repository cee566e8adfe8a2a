#include "worker_pool.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace trainsim {

WorkerPool& WorkerPool::shared() {
  static WorkerPool pool;
  return pool;
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::work(int index) {
  std::uint64_t seen = 0;
  while (true) {
    const std::function<void()>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(m_);
      start_.wait(lock, [&] { return stop_ || (generation_ != seen && index < active_); });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m_);
    if (error && !error_) error_ = error;
    if (--running_ == 0) finished_.notify_all();
  }
}

void WorkerPool::run(int threads, const std::function<void()>& fn) {
  std::lock_guard<std::mutex> one_run(run_mutex_);
  const int helpers = threads > 1 ? threads - 1 : 0;
  {
    std::lock_guard<std::mutex> lock(m_);
    while (static_cast<int>(threads_.size()) < helpers) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { work(index); });
    }
    job_ = &fn;
    active_ = helpers;
    running_ = helpers;
    error_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr mine;
  try {
    fn();
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(m_);
  finished_.wait(lock, [&] { return running_ == 0; });
  active_ = 0;
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::run_each(int threads, std::size_t n, const std::function<void(std::size_t)>& job) {
  if (n == 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), n));
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(n);
  run(threads, [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        job(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace trainsim
