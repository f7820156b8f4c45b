#pragma once
// One decode / verify step of one request, as the engine saw it: what was drafted, how much was
// accepted, what was committed. For `generate --trace`, per-request speculation stats, and the
// tests that replay the reference's per-step traces.
#include <cstdint>
#include <functional>
#include <vector>

namespace specserve::engine {

struct SpecStep {
  int64_t position = 0;          // absolute position of the pending token (the step's first row)
  std::vector<int32_t> drafts;   // the drafts verified (empty: a plain decode step)
  int accepted = 0;              // leading drafts accepted
  std::vector<int32_t> emitted;  // committed this step: the accepted drafts, then the target's pick
                                 // (the output may still be cut inside them by a stop / max_tokens)
};

// Called on the scheduler thread after each step of the request that set it.
using SpecStepObserver = std::function<void(const SpecStep&)>;

}  // namespace specserve::engine
