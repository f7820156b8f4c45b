#pragma once
// What the standalone GPU probes (tools/gpu/archive/*_probe.cu: no server library to link) share: CK(call), an
// error check that prints the error and where and exits, and the copy bandwidth their rooflines use.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      printf("err %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

// The device-copy bandwidth (bytes read + written per second, in GB/s) of a 2 GB cudaMemcpy on `s`:
// the best of `reps` copies.
inline double probe_copy_bandwidth(cudaStream_t s, int reps = 5) {
  const size_t n = size_t(1) << 31;
  void *a = nullptr, *c = nullptr;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&c, n));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e9f;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, s));
    CK(cudaMemcpyAsync(c, a, n, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    best = std::min(best, ms);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(a));
  CK(cudaFree(c));
  return 2.0 * n / (best * 1e-3) / 1e9;
}
