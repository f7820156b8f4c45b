#pragma once
// Runs one request through an Engine and waits for it: the output, its finish, and the per-step
// speculation records. What `specserve generate` (and bench_dflash, and the tests) need from the
// asynchronous engine.
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/spec_step.h"

namespace specserve::engine {

struct RequestRun {
  std::vector<int32_t> tokens;  // generated ids (a final stop token included, as the stream gives it)
  std::string text;
  FinishReason finish_reason = FinishReason::Stop;
  std::string error;
  Usage usage;
  std::vector<SpecStep> steps;  // every decode / verify step after the first token
  double first_token_ms = 0;    // submit → the first token's event (queueing + prefill + the first pick)
  double total_ms = 0;          // submit → the finishing event
};

// Submits `request` (its on_step observer, if any, still runs) and blocks until it finishes.
// Throws whatever submit() throws.
RequestRun run_request(Engine& engine, GenerationRequest request);

}  // namespace specserve::engine
