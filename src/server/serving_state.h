#pragma once
// What the HTTP server serves right now: the loading phase (503 on /health, progress shown),
// then the loaded model, then draining on shutdown. HTTP threads read it lock-free-ish through a
// shared_ptr snapshot, so a request that started before shutdown keeps its model alive.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "server/model_services.h"

namespace specserve::server {

enum class Phase { Loading, Ready, Draining, Failed };

class ServingState {
 public:
  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  // 0..1 while loading.
  void set_progress(double fraction, std::string what);
  double progress() const { return progress_.load(std::memory_order_relaxed); }
  std::string progress_text() const;

  void set_ready(std::shared_ptr<ModelServices> model);
  void set_failed(std::string message);
  void set_draining();
  std::shared_ptr<ModelServices> model() const;  // null until ready

 private:
  std::atomic<Phase> phase_{Phase::Loading};
  std::atomic<double> progress_{0};
  mutable std::mutex mutex_;
  std::string progress_text_ = "starting";
  std::shared_ptr<ModelServices> model_;
};

}  // namespace specserve::server
