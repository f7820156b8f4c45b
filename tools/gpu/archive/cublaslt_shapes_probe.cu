// Probe: how fast is cuBLASLt (bf16 x bf16 -> f32, f32 accumulation, the "TN" layout of y = x · wᵀ)
// on the DFlash drafters' and lm_heads' shapes? The premise of MatmulOrder::Free
// (src/backend/cuda/matmul_free_order.cpp): the drafter's matmuls need no fixed summation order, so a
// vendor GEMM may run them. Per shape: the first heuristic algorithm and the best of up to 8, 20 timed
// calls each after 3 warm-up calls, on one stream.
//
//   /usr/local/cuda/bin/nvcc -std=c++17 -arch=sm_90 -O2 -o cublaslt_probe tools/gpu/archive/cublaslt_shapes_probe.cu \
//       -lcublasLt && ./cublaslt_probe      (on an H100 / H200)
//
// H200 (driver 580.159.04, 2026-11-30), heuristic #0: 27B drafter at 256 rows q 19.8 us (542 TFLOP/s),
// o 21.2, gate/up 61.7 (739 TFLOP/s), down 71.9; 27B lm_head at 240 rows 779 us (783 TFLOP/s); 8B gate at
// 256 rows 37.0 us (696 TFLOP/s). At 15-16 rows (one block) the same calls are bound by the weight bytes
// (27B lm_head 15 rows: 603 us), as the row-invariant gemv kernel is.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#define CK(x)                                                  \
  do {                                                         \
    auto e = (x);                                              \
    if (e != 0) {                                              \
      printf("err %d at %s:%d\n", (int)e, __FILE__, __LINE__); \
      return 1;                                                \
    }                                                          \
  } while (0)
int main() {
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  size_t ws_bytes = 64 << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  struct S {
    const char* name;
    int M, N, K;
  };
  std::vector<S> shapes = {
      {"q 256", 256, 4096, 5120},         {"kv 256", 256, 1024, 5120},      {"o 256", 256, 5120, 4096},
      {"gate 256", 256, 17408, 5120},     {"down 256", 256, 5120, 17408},   {"fc 112", 112, 5120, 25600},
      {"lm_head 240", 240, 248320, 5120}, {"lm_head 60", 60, 248320, 5120}, {"gate 64", 64, 17408, 5120},
      {"q 64", 64, 4096, 5120},           {"down 64", 64, 5120, 17408},     {"8b gate 256", 256, 12288, 4096},
      {"8b q 256", 256, 4096, 4096},      {"8b lm 240", 240, 151936, 4096}, {"gate 16", 16, 17408, 5120},
      {"lm 15", 15, 248320, 5120}};
  void *a, *b, *d;
  CK(cudaMalloc(&a, size_t(248320) * 25600 / 4 * 2));
  CK(cudaMalloc(&b, size_t(256) * 25600 * 2));
  CK(cudaMalloc(&d, size_t(256) * 248320 * 4));
  cudaMemset(a, 0x3c, size_t(248320) * 25600 / 4 * 2);
  cudaMemset(b, 0x3c, size_t(256) * 25600 * 2);
  cudaStream_t st;
  cudaStreamCreate(&st);
  for (auto& s : shapes) {
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
    cublasLtMatrixLayout_t la, lb, ld;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.K, s.N, s.K));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.K, s.M, s.K));
    CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, s.N, s.M, s.N));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                            sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t res[8];
    int n = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 8, res, &n));
    float alpha = 1, beta = 0;
    double best = 1e9;
    int bi = -1;
    for (int i = 0; i < n; ++i) {
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      for (int w = 0; w < 3; ++w)
        cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &res[i].algo, ws, ws_bytes, st);
      cudaEventRecord(e0, st);
      const int it = 20;
      for (int w = 0; w < it; ++w)
        cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &res[i].algo, ws, ws_bytes, st);
      cudaEventRecord(e1, st);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      ms /= it;
      if (i == 0)
        printf("%-12s M=%d N=%d K=%d heuristic#0 %.1f us (%.0f TFLOP/s)\n", s.name, s.M, s.N, s.K, ms * 1e3,
               2.0 * s.M * s.N * s.K / (ms * 1e-3) / 1e12);
      if (ms < best) best = ms, bi = i;
    }
    printf("%-12s best of %d: #%d %.1f us (%.0f TFLOP/s) wsreq %zu\n", s.name, n, bi, best * 1e3,
           2.0 * s.M * s.N * s.K / (best * 1e-3) / 1e12, res[bi].workspaceSize);
  }
  CK(cudaGetLastError());
  return 0;
}
