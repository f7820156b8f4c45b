#pragma once
// The per-request channel from the scheduler thread to the HTTP thread that owns the request
// (llama.cpp's server-queue result side, one queue per request instead of one keyed map).
// The scheduler pushes outputs without ever blocking; the HTTP thread waits with a timeout so it
// can send SSE heartbeats and notice disconnects. Cancellation flows the other way through an
// atomic flag the scheduler checks at the top of every step.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/metrics.h"

namespace specserve::engine {

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// Log-probability of one emitted token (under the distribution it was sampled from, after the
// logits processors), with the top alternatives when requested.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache (usage.prompt_tokens_details)
};

// One batch of output. Text is released only once it can no longer turn into a stop string and
// is valid UTF-8 up to its end; tokens are every committed token (including a final EOS/stop
// token, which contributes no text).
struct StreamEvent {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;  // parallel to the tokens whose text was released (if requested)
  bool finished = false;
  FinishReason finish_reason = FinishReason::Stop;
  std::string error;  // finish_reason == Error
  Usage usage;        // filled on the finishing event
};

class ResultStream {
 public:
  // --- producer side (scheduler thread) ---
  void push(StreamEvent event);
  // --- consumer side (HTTP thread) ---
  // Moves every queued event into `out` (appending). Waits up to `timeout` when none is queued.
  // Returns false on timeout with nothing queued.
  bool wait(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout);
  // Asks the scheduler to stop this request and free its resources; idempotent, any thread.
  void cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  // Called on cancel() so an idle scheduler wakes up and frees the sequence at once.
  void set_cancel_hook(std::function<void()> hook);
  // Called after every push(), on the scheduler thread and outside the stream's lock, so a consumer
  // that serves many streams from one thread (the HTTP server's pump) wakes on output instead of
  // polling. The hook must be cheap and must not call back into the stream's producer side.
  void set_ready_hook(std::function<void()> hook);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<StreamEvent> queue_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finished_{false};
  std::function<void()> cancel_hook_;
  std::function<void()> ready_hook_;
};

}  // namespace specserve::engine
