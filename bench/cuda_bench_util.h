#pragma once
// Helpers shared by the CUDA micro-benchmarks (bench_cuda_*.cpp): error check, event timing of
// back-to-back calls on the backend's stream, and the device-to-device copy bandwidth that the
// memory-bound kernels are compared with.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"

namespace specserve::bench {

inline void check(cudaError_t e) {
  if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}

// Times `calls` back-to-back calls of fn(i) between two events; seconds per call.
template <class Fn>
double time_calls(int calls, Fn fn) {
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0));
  check(cudaEventCreate(&e1));
  check(cudaEventRecord(e0, cuda::cuda_stream()));
  for (int i = 0; i < calls; ++i) fn(i);
  check(cudaEventRecord(e1, cuda::cuda_stream()));
  check(cudaEventSynchronize(e1));
  float ms = 0;
  check(cudaEventElapsedTime(&ms, e0, e1));
  check(cudaEventDestroy(e0));
  check(cudaEventDestroy(e1));
  return ms / 1e3 / calls;
}

// Bytes per second a device-to-device copy moves (read + write), measured once on 1 GB.
inline double copy_bandwidth() {
  static const double bw = [] {
    const size_t bytes = size_t{1} << 30;
    cuda::DeviceBuffer a(bytes), b(bytes);
    auto copy = [&](int) {
      check(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, cuda::cuda_stream()));
    };
    time_calls(2, copy);
    return 2.0 * double(bytes) / time_calls(10, copy);
  }();
  return bw;
}

// The copy bandwidth as a benchmark of its own (run first: the other rows' "of_copy" base).
inline void BM_CopyRoofline(benchmark::State& st) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const double bw = copy_bandwidth();
  for (auto _ : st) st.SetIterationTime(2.0 * double(size_t{1} << 30) / bw);
  st.counters["GB/s"] = bw / 1e9;
}

}  // namespace specserve::bench
