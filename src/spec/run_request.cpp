#include "spec/run_request.h"

#include <chrono>
#include <memory>

namespace specserve::spec {

RequestRun run_request(engine::Engine& engine, engine::GenerationRequest request) {
  // The observer runs on the scheduler thread; the records are read here only after the finishing
  // event, which the stream's mutex orders after every observer call.
  auto steps = std::make_shared<std::vector<engine::SpecStep>>();
  engine::SpecStepObserver user = std::move(request.on_step);
  request.on_step = [steps, user](const engine::SpecStep& s) {
    steps->push_back(s);
    if (user) user(s);
  };
  auto stream = engine.submit(std::move(request));
  RequestRun run;
  std::vector<engine::StreamEvent> events;
  for (bool done = false; !done;) {
    events.clear();
    stream->wait(events, std::chrono::milliseconds(1000));
    for (auto& ev : events) {
      run.tokens.insert(run.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      run.text += ev.text;
      if (ev.finished) {
        run.finish_reason = ev.finish_reason;
        run.error = ev.error;
        run.usage = ev.usage;
        done = true;
      }
    }
  }
  run.steps = std::move(*steps);
  return run;
}

}  // namespace specserve::spec
