#pragma once
// Internal: the per-ISA matmul kernels behind Ops::matmul. Each computes output columns [n0, n1) of
// y[M, N] = x[M, K] · w[N, K]ᵀ for all M rows. Per output element the arithmetic is one vector
// accumulator (8 lanes AVX2, 16 lanes AVX-512) fed by FMAs in increasing k, a masked tail, then a
// fixed horizontal tree; tiles of several rows/columns only interleave independent chains, so the
// bits of y[m, n] do not depend on M, on the tile shape or on the thread that ran it.
#include <cstdint>

namespace specserve::cpu {

struct MatmulArgs {
  const float* x = nullptr;
  int64_t ldx = 0;  // floats between rows of x
  const void* w = nullptr;
  bool w_bf16 = false;
  int64_t ldw = 0;  // elements between rows of w
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t M = 0, K = 0;
  // x rounded to bf16 (the AVX512-BF16 kernel only), rows ldx_bf16 elements apart.
  const uint16_t* x_bf16 = nullptr;
  int64_t ldx_bf16 = 0;
  // A block-scaled fp8 weight (w is then unused and w_bf16 set: the kernel runs on its bf16 dequantisation,
  // matmul_fp8.cpp): e4m3 codes rows ldw bytes apart and f32 scales [ceil(N / 128), scale_ld].
  const uint8_t* w_fp8 = nullptr;
  const float* w_scales = nullptr;
  int64_t scale_ld = 0;
};

// Columns [n0, n1) of y with this process's kernel (fp8 weights through matmul_cols_fp8).
void matmul_cols(const MatmulArgs& a, int64_t n0, int64_t n1);

void matmul_cols_avx2(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_cols_avx512(const MatmulArgs& a, int64_t n0, int64_t n1);  // only after use_avx512()
// bf16 weights with x_bf16 set; only after use_avx512_bf16().
void matmul_cols_avx512bf16(const MatmulArgs& a, int64_t n0, int64_t n1);

// An fp8 weight (a.w_fp8): rows of it are dequantised to bf16, a few at a time, into a per-thread buffer
// (dequantize_fp8_rows_bf16) and the bf16 kernel runs over them, so every element gets the bits the bf16
// matmul gives with the weight dequantised at load (matmul_fp8.cpp).
void matmul_cols_fp8(const MatmulArgs& a, int64_t n0, int64_t n1);
// Rows [n0, n1) of a's fp8 weight as bf16 (K elements each, rows K apart, into out): each element
// bf16_rn(f32(e4m3) × scale), the bits of io/fp8_blocks.h dequantize_fp8_blocks(..., BF16).
void dequantize_fp8_rows_bf16(const MatmulArgs& a, int64_t n0, int64_t n1, uint16_t* out);

// n (at most 128) codes of one 128 x 128 block into bf16 bits through its table's 16 entries (fp8_bf16_table.h);
// only after use_avx512() (matmul_fp8_avx512.cpp).
void dequantize_fp8_table_avx512(const uint8_t* codes, const uint16_t* entries, int64_t n, uint16_t* out);

// Which kernel a bf16-weight matmul uses on this machine (fixed for the process).
bool bf16_dot_kernel();

}  // namespace specserve::cpu
