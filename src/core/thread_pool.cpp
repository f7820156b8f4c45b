#include "core/thread_pool.h"

#include "core/env_registry.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <immintrin.h>
#include <sched.h>

namespace specserve {

namespace {
int spin_iterations();
}  // namespace

ThreadPool::ThreadPool(int threads) {
  // Reads SPECSERVE_POOL_SPIN now, so a malformed value fails here with an Error, not in a worker.
  (void)spin_iterations();
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

namespace {
// Spin iterations before sleeping: with _mm_pause at ~40-140 cycles each, tens of microseconds —
// longer than the gap between the kernels of one forward pass. Every kYieldEvery pauses the spinner
// calls sched_yield(): on an idle machine that returns at once, but when another process shares
// the cores it hands the core over (a pure spin there stole the core the partner thread needed and
// made decoding 4x slower; sleeping at once made an idle 2-core decode 40 % slower).
// SPECSERVE_POOL_SPIN (core/env_registry.h, default 4000) sets the count (0: sleep at once).
constexpr int kYieldEvery = 32;
int spin_iterations() {
  static const int n = static_cast<int>(std::max<int64_t>(0, env_int("SPECSERVE_POOL_SPIN")));
  return n;
}

inline void spin_pause(int i) {
  if ((i + 1) % kYieldEvery == 0)
    sched_yield();
  else
    _mm_pause();
}
}  // namespace

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  const int spins = spin_iterations();
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < spins && !stop_.load(std::memory_order_relaxed); ++i) {
      spin_pause(i);
      gen = generation_.load(std::memory_order_acquire);
    }
    std::unique_lock lock(mutex_);
    if (generation_.load(std::memory_order_relaxed) == seen && !stop_) {
      sleepers_.fetch_add(1, std::memory_order_relaxed);
      start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_relaxed);
    const auto* job = job_;
    auto chunk = index < static_cast<int>(chunks_.size()) ? chunks_[index] : std::pair<int64_t, int64_t>{0, 0};
    lock.unlock();
    if (chunk.first < chunk.second) (*job)(chunk.first, chunk.second);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard done_lock(mutex_);  // orders the notify after the caller's predicate check
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t units = (n + grain - 1) / grain;
  int parts = static_cast<int>(std::min<int64_t>(size(), units));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  std::lock_guard run_lock(run_mutex_);
  std::vector<std::pair<int64_t, int64_t>> chunks(size(), {0, 0});
  for (int p = 0; p < parts; ++p) {
    int64_t b = units * p / parts * grain;
    int64_t e = std::min(n, units * (p + 1) / parts * grain);
    chunks[p] = {b, e};
  }
  std::pair<int64_t, int64_t> mine;
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    chunks_ = std::move(chunks);
    mine = chunks_[0];
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load(std::memory_order_relaxed) > 0) start_cv_.notify_all();
  fn(mine.first, mine.second);
  for (int i = 0, spins = spin_iterations(); pending_.load(std::memory_order_acquire) != 0 && i < spins; ++i)
    spin_pause(i);
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  std::lock_guard lock(mutex_);
  job_ = nullptr;
}

namespace {
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
std::mutex& global_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

ThreadPool& ThreadPool::global() {
  std::lock_guard lock(global_mutex());
  auto& slot = global_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(0);
  return *slot;
}

void ThreadPool::set_global_threads(int threads) {
  std::lock_guard lock(global_mutex());
  global_slot() = std::make_unique<ThreadPool>(threads);
}

}  // namespace specserve
