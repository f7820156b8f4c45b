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
  // Writes the step's line: marks (0 for a stage that did not run), rows, decoding sequences, drafting.
  void end(int64_t rows, int64_t sequences, int64_t drafted);

 private:
  static int64_t now_ns();
  std::FILE* file_ = nullptr;
  uint64_t steps_ = 0;
  int64_t marks_[kMarks] = {};
};

}  // namespace specserve::engine
