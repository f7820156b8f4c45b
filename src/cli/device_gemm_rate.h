#pragma once
// The bf16 GEMM rate of the device a benchmark runs on (backend/cuda/gemm_rate.h), reachable from
// host-only code: in a build without CUDA, or for a model on the CPU, there is none to measure.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specserve::cli {

struct DeviceGemmRate {
  int64_t m = 0, n = 0, k = 0;
  int iterations = 0;
  double ms = 0;  // median of one GEMM
  double tflops = 0;
  std::string how;  // what was timed, for the report
};

// An 8192 × 8192 × 8192 bf16 GEMM (f32 accumulation) through cuBLASLt on `backend` ("cuda"), or
// nothing for any other backend and in a build without CUDA.
std::optional<DeviceGemmRate> measure_device_gemm_rate(std::string_view backend);

}  // namespace specserve::cli
