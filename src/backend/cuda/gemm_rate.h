#pragma once
// The device's bf16 GEMM rate as cuBLASLt reaches it on random data: the yardstick `specserve bench
// steps` holds the prefill matmuls against (docs/BENCHMARKS.md, "How to measure").
#include <cstdint>

namespace specserve::cuda {

struct GemmRate {
  int64_t m = 0, n = 0, k = 0;
  int iterations = 0;       // timed launches
  double seconds = 0;       // median of one launch
  double tflops = 0;        // 2·m·n·k / seconds / 1e12
  const char* layout = "";  // what was multiplied, for the report
};

// Times D [m, n] = A [m, k] · B [k, n] with bf16 operands uniform in [-1, 1), a bf16 D and f32
// accumulation (CUBLAS_COMPUTE_32F), the algorithm cuBLASLt's heuristic picks, on the backend's stream
// (cuda_stream.h), each launch between two CUDA events: the median of `iterations` launches after 3
// warm-ups. Allocates and frees its operands (3 · 2 bytes per element) and a 32 MiB workspace.
GemmRate measure_bf16_gemm_rate(int64_t m = 8192, int64_t n = 8192, int64_t k = 8192, int iterations = 20);

}  // namespace specserve::cuda
