#include "cli/serve_recording.h"

namespace specserve::cli {

namespace {

// Moves the engine stream's events to the HTTP layer's, keeping the output ids; one per request.
struct Tee {
  std::mutex mutex;  // one drain at a time, so events keep their order
  std::shared_ptr<engine::ResultStream> in;
  std::weak_ptr<engine::ResultStream> out;  // the HTTP layer owns it; gone when it has let go
  ServedRequest request;
  bool done = false;
};

}  // namespace

std::shared_ptr<engine::ResultStream> RecordingServices::submit(const server::CommonRequest& request,
                                                                std::vector<int32_t> prompt_tokens) {
  auto tee = std::make_shared<Tee>();
  tee->request.tokens.prompt = prompt_tokens;
  tee->in = model_->submit(request, std::move(prompt_tokens));
  auto out = std::make_shared<engine::ResultStream>();
  tee->out = out;
  out->set_cancel_hook([in = tee->in] { in->cancel(); });
  // Runs on the engine's thread after each push (outside the stream's lock), and once here for what the
  // engine pushed before the hook was set. The hook holds the tee, the tee the engine's stream: the cycle
  // ends when the request finishes (the hook is replaced by an empty one).
  auto drain = [this, tee] {
    std::lock_guard lock(tee->mutex);
    if (tee->done) return;
    std::vector<engine::StreamEvent> events;
    if (!tee->in->wait(events, std::chrono::milliseconds(0))) return;
    const std::shared_ptr<engine::ResultStream> http = tee->out.lock();
    for (engine::StreamEvent& ev : events) {
      auto& output = tee->request.tokens.output;
      output.insert(output.end(), ev.tokens.begin(), ev.tokens.end());
      const bool last = ev.finished;
      if (last) {
        // Recorded before the HTTP layer can see the end: a client that has its whole answer may end the
        // level, and the level then takes the records.
        if (ev.finish_reason == engine::FinishReason::Error) tee->request.error = ev.error;
        tee->done = true;
        finished(std::move(tee->request));
      }
      if (http) http->push(std::move(ev));
      if (!last) continue;
      tee->in->set_ready_hook({});
      return;
    }
  };
  tee->in->set_ready_hook(drain);
  drain();
  return out;
}

void RecordingServices::finished(ServedRequest request) {
  std::lock_guard lock(mutex_);
  finished_.push_back(std::move(request));
}

std::vector<ServedRequest> RecordingServices::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(finished_, {});
}

}  // namespace specserve::cli
