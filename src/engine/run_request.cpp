#include "engine/run_request.h"

#include <chrono>
#include <memory>

namespace specserve::engine {

RequestRun run_request(Engine& engine, GenerationRequest request) {
  // The observer runs on the scheduler thread; the records are read here only after the finishing
  // event, which the stream's mutex orders after every observer call.
  auto steps = std::make_shared<std::vector<SpecStep>>();
  SpecStepObserver user = std::move(request.on_step);
  request.on_step = [steps, user](const SpecStep& s) {
    steps->push_back(s);
    if (user) user(s);
  };
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto ms = [t0] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  auto stream = engine.submit(std::move(request));
  RequestRun run;
  bool first = true;
  std::vector<StreamEvent> events;
  for (bool done = false; !done;) {
    events.clear();
    stream->wait(events, std::chrono::milliseconds(1000));
    for (auto& ev : events) {
      if (first && !ev.tokens.empty()) {
        run.first_token_ms = ms();
        first = false;
      }
      run.tokens.insert(run.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      run.text += ev.text;
      if (ev.finished) {
        run.finish_reason = ev.finish_reason;
        run.error = ev.error;
        run.usage = ev.usage;
        run.total_ms = ms();
        done = true;
      }
    }
  }
  run.steps = std::move(*steps);
  return run;
}

}  // namespace specserve::engine
