#pragma once
// A fixed-size CPU thread pool for data-parallel kernels. parallel_for splits [0, n) into
// contiguous chunks, one per thread (static partition: which thread computes an element never
// changes the arithmetic, so results do not depend on the thread count).
//
// Hand-off: a decode step of a small model is hundreds of short parallel_for calls, where futex
// sleeps and wake-ups cost more than the work. So workers spin (with pause) for a short while after
// a job before they sleep on the condition variable, and the caller spins for the workers' chunks
// before it sleeps; a worker that did sleep is woken through the condition variable as before.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specserve {

class ThreadPool {
 public:
  // threads == 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); chunk boundaries are multiples
  // of `grain` (except the last). Blocks until all chunks are done. The calling thread works too.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // The process-wide pool used by CPU kernels; set its size once at start-up.
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks_;
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) to publish a job
  std::atomic<int> pending_{0};          // worker chunks not finished yet
  std::atomic<int> sleepers_{0};         // workers blocked on start_cv_
  std::atomic<bool> stop_{false};
  std::mutex run_mutex_;  // serialises concurrent parallel_for callers
};

}  // namespace specserve
