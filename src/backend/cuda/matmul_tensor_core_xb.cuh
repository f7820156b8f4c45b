#pragma once
// The bf16 copy of x that the tiled tensor-core kernel reads (matmul_tensor_core.cu; the pre-pass
// kernel is matmul_tensor_core_xb.cu): x rounded to bf16 ONCE per call, element by element, round to
// nearest even, by the same two-element conversion (cvt.rn.bf16x2.f32, pack_bf16x2) that builds the
// streaming kernel's A fragments, so the tiled kernel's mma operands are bit for bit the streaming
// kernel's (the numerics contract heading matmul_tensor_core.cu). Reading bf16 instead of f32 halves
// the x bytes every column tile streams from L2 and lets ldmatrix load the A fragments.
//
// Layout: xb_rows(M) rows (M rounded up to 16: whole m16 tiles) of pitch xb_pitch(K, KT) elements, row
// major; element (m, k) = bf16(x[m, k]) for m < M and k < K, +0 elsewhere. The pitch covers every K
// tile a slice loads (the last one may run up to KT - 16 past the last chunk), so the kernel copies
// whole 16-byte pieces without bounds checks; it is a multiple of 16 elements (32 bytes).
//
// Plain C++ that also compiles on the host, so the CPU emulation
// (tests/backend_cuda/test_cuda_matmul_tensor_core.cpp) builds its xb with the same index code.
#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve::cuda::tc {

constexpr int64_t xb_rows(int64_t M) { return ceil_div(M, kMmaK) * kMmaK; }
constexpr int64_t xb_pitch(int64_t K, int kt) { return ceil_div(K, kMmaK) * kMmaK + kt; }

// Register `i` of the copy (elements 2i and 2i + 1 of the row-major [xb_rows(M), pitch] array, the
// lower k in the low half): pack2(lo, hi) of its two f32 sources, +0 outside x.
template <class Pack2>
SS_TC_DEV uint32_t xb_pair(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t pitch, int64_t i, Pack2 pack2) {
  const int64_t m = 2 * i / pitch, k = 2 * i % pitch;
  const float* row = x + (m < M ? m : 0) * ldx;
  const float lo = m < M && k < K ? row[k] : 0.0f;
  const float hi = m < M && k + 1 < K ? row[k + 1] : 0.0f;
  return pack2(lo, hi);
}

}  // namespace specserve::cuda::tc
