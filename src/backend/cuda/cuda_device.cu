#include "backend/cuda/cuda_device.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

namespace specserve::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return n;
}

DeviceInfo device_info(int index) {
  cudaDeviceProp prop{};
  DeviceInfo info;
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return info;
  info.index = index;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.total_memory = prop.totalGlobalMem;
  return info;
}

void profiler_start() { cudaProfilerStart(); }
void profiler_stop() { cudaProfilerStop(); }

std::string unavailable_reason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(err);
  }
  return n == 0 ? "no CUDA device present" : "";
}

}  // namespace specserve::cuda
