// The calling thread's current device and the scope that changes it (device_scope.h).
#include "backend/cuda/device_scope.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace specserve::cuda {

namespace {
thread_local int t_device = -1;  // -1: not read yet
}  // namespace

int current_device() {
  if (t_device < 0) {
    int d = 0;
    CUDA_CHECK(cudaGetDevice(&d));
    SS_CHECK(d >= 0 && d < kMaxDevices, "CUDA device {}: this build drives devices 0 to {}", d, kMaxDevices - 1);
    t_device = d;
  }
  return t_device;
}

int make_current(int device) {
  SS_CHECK(device >= 0 && device < kMaxDevices, "CUDA device {}: this build drives devices 0 to {}", device,
           kMaxDevices - 1);
  const int previous = current_device();
  if (device == previous) return -1;
  CUDA_CHECK(cudaSetDevice(device));
  t_device = device;
  return previous;
}

void restore_current(int previous) noexcept {
  if (previous < 0) return;
  cudaSetDevice(previous);  // (no throw here; the next CUDA call reports a failure)
  t_device = previous;
}

DeviceScope::DeviceScope(int device) : previous_(make_current(device)) {}

DeviceScope::~DeviceScope() { restore_current(previous_); }

}  // namespace specserve::cuda
