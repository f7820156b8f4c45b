#include "engine/step_trace.h"

#include <ctime>
#include <string>

#include "core/env_registry.h"
#include "core/log.h"

namespace specserve::engine {

StepTrace::StepTrace() {
  const std::string path(env_text("SPECSERVE_STEP_TRACE"));
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");  // one header and its steps per engine, in order
  if (file_ == nullptr) {
    SS_LOG_WARN("engine", "SPECSERVE_STEP_TRACE: cannot write {}; no step trace", path);
    return;
  }
  std::fprintf(file_,
               "step,start_ns,schedule,plan,layout,forward,commit,context,stream,propose,retire,rows,"
               "sequences,drafted,model_ms,plain_correction,drafting_correction,prefill_held\n");
}

StepTrace::~StepTrace() {
  if (file_ != nullptr) std::fclose(file_);
}

// CLOCK_MONOTONIC, which CUPTI's timestamps can be aligned with.
int64_t StepTrace::now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

void StepTrace::end(int64_t rows, int64_t sequences, int64_t drafted) {
  if (!on()) return;
  std::fprintf(file_, "%llu", static_cast<unsigned long long>(steps_++));
  for (int i = 0; i < kMarks; ++i) std::fprintf(file_, ",%lld", static_cast<long long>(marks_[i]));
  std::fprintf(file_, ",%lld,%lld,%lld,%.4f,%.4f,%.4f,%d\n", static_cast<long long>(rows),
               static_cast<long long>(sequences), static_cast<long long>(drafted), model_seconds_ * 1e3,
               plain_correction_, drafting_correction_, held_ ? 1 : 0);
  for (int64_t& m : marks_) m = 0;
  model_seconds_ = plain_correction_ = drafting_correction_ = 0;
  held_ = false;
}

}  // namespace specserve::engine
