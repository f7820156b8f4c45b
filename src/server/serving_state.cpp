#include "server/serving_state.h"

namespace specserve::server {

void ServingState::set_progress(double fraction, std::string what) {
  progress_.store(fraction, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  progress_text_ = std::move(what);
}

std::string ServingState::progress_text() const {
  std::lock_guard lock(mutex_);
  return progress_text_;
}

void ServingState::set_ready(std::shared_ptr<ModelServices> model) {
  {
    std::lock_guard lock(mutex_);
    model_ = std::move(model);
    progress_text_ = "ready";
  }
  progress_.store(1.0);
  phase_.store(Phase::Ready, std::memory_order_release);
}

void ServingState::set_failed(std::string message) {
  {
    std::lock_guard lock(mutex_);
    progress_text_ = std::move(message);
  }
  phase_.store(Phase::Failed, std::memory_order_release);
}

void ServingState::set_draining() { phase_.store(Phase::Draining, std::memory_order_release); }

std::shared_ptr<ModelServices> ServingState::model() const {
  std::lock_guard lock(mutex_);
  return model_;
}

}  // namespace specserve::server
