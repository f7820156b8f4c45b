#pragma once
// CUDA device discovery. Safe to call on machines without a GPU or driver: reports none.
#include <string>

namespace specserve::cuda {

struct DeviceInfo {
  int index = -1;
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  size_t total_memory = 0;
};

// Number of usable CUDA devices (0 when no driver / no GPU).
int device_count();
// Information about device `index`; requires 0 <= index < device_count().
DeviceInfo device_info(int index);

// Brackets a region for a profiler started with `ncu --profile-from-start off` (no-ops otherwise).
void profiler_start();
void profiler_stop();
// A one-line explanation when device_count() is 0 (e.g. the driver error string).
std::string unavailable_reason();

}  // namespace specserve::cuda
