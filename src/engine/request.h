#pragma once
// A generation request as the engine receives it: token ids and fully resolved sampling/stop
// parameters. Everything textual (chat template, tokenization, JSON) was done by the caller.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/spec_step.h"
#include "sampling/sampling_params.h"

namespace specserve::engine {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
  std::vector<int32_t> prompt;
  sampling::RequestParams params;  // stop.max_tokens must be set (the caller resolves the default)
  Clock::time_point arrival = Clock::now();
  std::optional<Clock::time_point> deadline;  // cancelled (freed) when still running past this
  bool speculate = true;                      // use the drafter when the engine has one
  // Optional: called on the scheduler thread after each decode / verify step of this request, once the
  // step's rows are committed (the drafter's context included) and before the step's tokens reach the
  // request's stream (engine/step.cpp, stream_tokens), so a finished stream's observer calls have all run
  // (generate --trace, per-request speculation stats, bench controlled).
  SpecStepObserver on_step;
};

}  // namespace specserve::engine
