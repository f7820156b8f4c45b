#pragma once
// A debugging aid (SPECSERVE_STEP_TRACE=FILE, core/env_registry.cpp): the host's clock at the start of
// every engine step and at the end of each of its stages (engine/step.cpp), one CSV line a step, so a
// GPU timeline (tools/gpu/kernel_trace.cpp) can be read against what the scheduler thread was doing. Each
// engine appends its header line and then its steps.
// Off (the variable unset), every call is a test of one bool.
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace specserve::engine {

class StepTrace {
 public:
  static constexpr int kMarks = 10;  // the step's start, then the end of stages 1..9

  StepTrace();
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  bool on() const { return file_ != nullptr; }
  // The step's start (mark 0).
  void begin() {
    if (on()) mark(0);
  }
  // Stage `stage` (1..9) has ended.
  void mark(int stage) {
    if (on()) marks_[stage] = now_ns();
  }
  // The adaptive policy's choice for the next step: its model seconds and the corrections it applied.
  void policy(double model_seconds, double plain_correction, double drafting_correction) {
    if (!on()) return;
    model_seconds_ = model_seconds;
    plain_correction_ = plain_correction;
    drafting_correction_ = drafting_correction;
  }
  // The prefill hold kept this step's short prefill chunks back (engine/batch_plan.h).
  void prefill_held() {
    if (on()) held_ = true;
  }
  // Writes the step's line: marks (0 for a stage that did not run), rows, decoding sequences, drafts
  // proposed for the next step, the policy's choice (0 when it made none), and 1 where the prefill hold held.
  void end(int64_t rows, int64_t sequences, int64_t drafted);

 private:
  static int64_t now_ns();
  std::FILE* file_ = nullptr;
  uint64_t steps_ = 0;
  int64_t marks_[kMarks] = {};
  double model_seconds_ = 0, plain_correction_ = 0, drafting_correction_ = 0;
  bool held_ = false;
};

}  // namespace specserve::engine
