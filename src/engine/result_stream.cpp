#include "engine/result_stream.h"

namespace specserve::engine {

void ResultStream::push(StreamEvent event) {
  std::function<void()> ready;
  {
    std::lock_guard lock(mutex_);
    if (event.finished) finished_.store(true, std::memory_order_release);
    queue_.push_back(std::move(event));
    ready = ready_hook_;
  }
  cv_.notify_all();
  if (ready) ready();
}

bool ResultStream::wait(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (queue_.empty() && !cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return false;
  for (auto& e : queue_) out.push_back(std::move(e));
  queue_.clear();
  return true;
}

void ResultStream::cancel() {
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  std::function<void()> hook;
  {
    std::lock_guard lock(mutex_);
    hook = cancel_hook_;
  }
  if (hook) hook();
}

void ResultStream::set_cancel_hook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  cancel_hook_ = std::move(hook);
}

void ResultStream::set_ready_hook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  ready_hook_ = std::move(hook);
}

}  // namespace specserve::engine
