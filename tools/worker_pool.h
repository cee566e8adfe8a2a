#pragma once
// Threads kept for the life of the process. A search runs on them instead of threads of its own,
// so what each thread keeps between simulations (the engine and the memory it has grown) is still
// there for the next search, and a search of a few layouts does not pay for starting threads.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace trainsim {

class WorkerPool {
 public:
  static WorkerPool& shared();
  ~WorkerPool();

  // Runs `fn` on `threads` threads at once, the caller's being one of them, and returns once every
  // one has returned. The first exception thrown by any of them is rethrown here. Calls from
  // different threads run one after the other.
  void run(int threads, const std::function<void()>& fn);
  // Runs job(i) once for every i in [0, n), on up to `threads` threads at once (0: one a core),
  // each taking the next index left. Where jobs throw, every index still runs, and the exception
  // of the lowest index that threw is rethrown here (the same one however many threads ran).
  void run_each(int threads, std::size_t n, const std::function<void(std::size_t)>& job);

 private:
  void work(int index);

  std::mutex run_mutex_;  // one run at a time
  std::mutex m_;
  std::condition_variable start_, finished_;
  std::vector<std::thread> threads_;
  const std::function<void()>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int active_ = 0;   // pool threads taking part in the current run
  int running_ = 0;  // of those, how many have not returned yet
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace trainsim
