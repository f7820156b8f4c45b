#pragma once
// The loads and the A-fragment code of the streaming tensor-core kernel (matmul_tensor_core_gemv.cuh;
// a first streaming kernel shared them until issue 31): up to 16 rows of weights or of f32 x
// into shared memory through an offset function, and an A fragment built from f32 x. Plain C++ that
// also compiles on the host (the emulation test runs it).
#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve::cuda::tc {

// 16 weight rows (from n0w) x kKT k (from k0) through off(row, k): rows past N and k past K are zero.
// The warp's lanes take 16-byte pieces (or elements) round robin.
template <int KT, class Off, class Cp16W, class StB16>
SS_TC_DEV void load_w_rows16(const Params& p, int64_t n0w, int64_t k0, int lane, Off off, Cp16W cp16_w, StB16 st_b16) {
  if (p.vec_w) {
    constexpr int kPer = KT / 8;
    SS_TC_UNROLL
    for (int i = lane; i < 16 * kPer; i += 32) {
      const int r = i / kPer, c = (i % kPer) * 8;
      const int64_t k = k0 + c, n = n0w + r;
      const int bytes = n >= p.N || k >= p.K ? 0 : p.K - k >= 8 ? 16 : static_cast<int>(p.K - k) * 2;
      cp16_w(off(r, c), bytes ? p.w + n * p.ldw + k : p.w, bytes);
    }
  } else {
    for (int i = lane; i < 16 * KT; i += 32) {
      const int r = i / KT, c = i % KT;
      const int64_t k = k0 + c, n = n0w + r;
      st_b16(off(r, c), n < p.N && k < p.K ? p.w[n * p.ldw + k] : uint16_t{0});
    }
  }
}

// `width` k (from k0) of x rows m0 .. m0 + min(16, M - m0) - 1 through off(row, k); k past K is zero.
// Threads tid of `threads` take pieces round robin.
template <class Off, class Cp16X, class StF32>
SS_TC_DEV void load_x_rows(const Params& p, int64_t m0, int64_t k0, int width, int tid, int threads, Off off,
                           Cp16X cp16_x, StF32 st_f32) {
  const int rows = p.M - m0 < 16 ? static_cast<int>(p.M - m0) : 16;
  if (p.vec_x) {
    const int per = width / 4;
    for (int i = tid; i < rows * per; i += threads) {
      const int r = i / per, c = (i % per) * 4;
      const int64_t k = k0 + c;
      const int bytes = k >= p.K ? 0 : p.K - k >= 4 ? 16 : static_cast<int>(p.K - k) * 4;
      cp16_x(off(r, c), bytes ? p.x + (m0 + r) * p.ldx + k : p.x, bytes);
    }
  } else {
    for (int i = tid; i < rows * width; i += threads) {
      const int r = i / width, c = i % width;
      const int64_t k = k0 + c;
      st_f32(off(r, c), k < p.K ? p.x[(m0 + r) * p.ldx + k] : 0.0f);
    }
  }
}

// The A fragment of one chunk from f32 x through off(row, col of the chunk): rows at or past
// `valid_rows` are zero (never read); the others are read as f32 pairs and rounded by cvt2.
template <class Off, class Cvt2>
SS_TC_DEV void gather_a_f32(int lane, int valid_rows, Off off, uint32_t (&a)[4], Cvt2 cvt2) {
  SS_TC_UNROLL
  for (int reg = 0; reg < 4; ++reg) {
    const RowCol rc = a_frag(lane, reg);
    a[reg] = rc.row < valid_rows ? cvt2(off(rc.row, rc.col)) : 0u;
  }
}

}  // namespace specserve::cuda::tc
