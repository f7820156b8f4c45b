#include "backend/cuda/gemm_rate.h"

#include <cublasLt.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace specserve::cuda {

namespace {

#define RATE_LT_CHECK(expr)                                                                            \
  do {                                                                                                 \
    const cublasStatus_t ss_rate_status_ = (expr);                                                     \
    if (ss_rate_status_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::specserve::fail("cuBLASLt: {} failed: {} ({})", #expr, cublasGetStatusString(ss_rate_status_), \
                        static_cast<int>(ss_rate_status_));                                            \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Device blocks and cuBLASLt objects of one measurement, released however it ends.
struct Resources {
  void *a = nullptr, *b = nullptr, *d = nullptr, *workspace = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Resources() {
    cudaStreamSynchronize(cuda_stream());
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
    for (void* p : {a, b, d, workspace})
      if (p) cudaFree(p);
  }
};

}  // namespace

GemmRate measure_bf16_gemm_rate(int64_t m, int64_t n, int64_t k, int iterations) {
  SS_CHECK(m > 0 && n > 0 && k > 0 && iterations > 0, "gemm rate: sizes and iterations must be positive");
  Resources r;
  const cudaStream_t stream = cuda_stream();
  CUDA_CHECK(cudaMalloc(&r.a, static_cast<size_t>(m * k) * 2));
  CUDA_CHECK(cudaMalloc(&r.b, static_cast<size_t>(k * n) * 2));
  CUDA_CHECK(cudaMalloc(&r.d, static_cast<size_t>(m * n) * 2));
  CUDA_CHECK(cudaMalloc(&r.workspace, kWorkspaceBytes));
  // Random operands: a GEMM on zeros draws less power and runs faster than one on real data.
  kernels::fill_uniform(r.a, /*bf16=*/true, m * k, 11, -1.0f, 1.0f, stream);
  kernels::fill_uniform(r.b, /*bf16=*/true, k * n, 12, -1.0f, 1.0f, stream);

  // Column major, as cuBLASLt sees it: A is stored k × m (row-major [m, k]) and transposed, B k × n,
  // D m × n: the "TN" layout of a weight-times-activations GEMM.
  RATE_LT_CHECK(cublasLtCreate(&r.handle));
  RATE_LT_CHECK(cublasLtMatmulDescCreate(&r.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  RATE_LT_CHECK(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  RATE_LT_CHECK(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  RATE_LT_CHECK(cublasLtMatrixLayoutCreate(&r.la, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  RATE_LT_CHECK(cublasLtMatrixLayoutCreate(&r.lb, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  RATE_LT_CHECK(cublasLtMatrixLayoutCreate(&r.ld, CUDA_R_16BF, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m));
  RATE_LT_CHECK(cublasLtMatmulPreferenceCreate(&r.pref));
  const size_t ws = kWorkspaceBytes;
  RATE_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  RATE_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(r.handle, r.op, r.la, r.lb, r.ld, r.ld, r.pref, 1, &heuristic, &found));
  SS_CHECK(found > 0, "gemm rate: cuBLASLt has no algorithm for a {}x{}x{} bf16 GEMM", m, n, k);

  const float alpha = 1.0f, beta = 0.0f;
  auto launch = [&] {
    RATE_LT_CHECK(cublasLtMatmul(r.handle, r.op, &alpha, r.a, r.la, r.b, r.lb, &beta, r.d, r.ld, r.d, r.ld,
                                 &heuristic.algo, r.workspace, kWorkspaceBytes, stream));
  };
  for (int i = 0; i < 3; ++i) launch();
  CUDA_CHECK(cudaEventCreate(&r.start));
  CUDA_CHECK(cudaEventCreate(&r.stop));
  std::vector<double> seconds;
  for (int i = 0; i < iterations; ++i) {
    CUDA_CHECK(cudaEventRecord(r.start, stream));
    launch();
    CUDA_CHECK(cudaEventRecord(r.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(r.stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    seconds.push_back(ms * 1e-3);
  }
  std::sort(seconds.begin(), seconds.end());
  GemmRate g;
  g.m = m, g.n = n, g.k = k, g.iterations = iterations;
  g.seconds = seconds[seconds.size() / 2];
  g.tflops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / g.seconds / 1e12;
  g.layout = "cuBLASLt bf16 x bf16 -> bf16, f32 accumulate, TN";
  return g;
}

}  // namespace specserve::cuda
