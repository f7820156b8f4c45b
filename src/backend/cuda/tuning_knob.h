#pragma once
// Benchmark tuning knobs of the CUDA backend (SPECSERVE_TC_*, SPECSERVE_PDL, SPECSERVE_ATTN_*):
// they change which kernel or launch shape runs, never a result's bits. Plain C++ (the host emulation
// tests include it through matmul_tensor_core.cuh).
#include <cstdint>
#include <cstdlib>

namespace specserve::cuda {

// The integer value of environment variable `name`, or `fallback` when it is not set. Callers read it
// once into a static, so a knob is fixed for the process's life.
inline int64_t tuning_knob(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? static_cast<int64_t>(std::atoll(v)) : fallback;
}

}  // namespace specserve::cuda
