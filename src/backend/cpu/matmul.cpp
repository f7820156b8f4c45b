// Matmul y = x · wᵀ (f32 activations, f32, bf16 or block-scaled fp8 weights, f32 accumulation): the AVX2
// kernel and the dispatcher. See matmul_kernels.h for why the result of an element does not depend on M.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/simd.h"
#include "core/cpu_features.h"
#include "core/env_registry.h"
#include "backend/op_checks.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace specserve::cpu {

namespace {

inline __m256 load_w8(const float* w) { return _mm256_loadu_ps(w); }
inline __m256 load_w8(const uint16_t* w) { return load_bf16x8(w); }

inline __m256 load_w_tail(const float* w, int n) { return _mm256_maskload_ps(w, tail_mask8(n)); }
inline __m256 load_w_tail(const uint16_t* w, int n) {
  alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(tmp, w, static_cast<size_t>(n) * 2);
  return load_bf16x8(tmp);
}

// R rows x C columns of y; every element is its own FMA chain.
template <int R, int C, typename W>
inline void tile(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy, int64_t K) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w8(w + c * ldw + k);
    for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * ldx + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (k < K) {
    int n = static_cast<int>(K - k);
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w_tail(w + c * ldw + k, n);
    for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_maskload_ps(x + r * ldx + k, tail_mask8(n));
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ldy + c] = hsum8(acc[r][c]);
}

template <typename W>
void cols(const MatmulArgs& a, const W* w, int64_t n0, int64_t n1) {
  constexpr int64_t kColBlock = 64;  // weight rows kept hot in cache while all x rows pass over them
  for (int64_t nb = n0; nb < n1; nb += kColBlock) {
    int64_t ne = std::min(nb + kColBlock, n1);
    int64_t m = 0;
    for (; m + 4 <= a.M; m += 4) {
      const float* x = a.x + m * a.ldx;
      float* y = a.y + m * a.ldy;
      int64_t n = nb;
      for (; n + 2 <= ne; n += 2) tile<4, 2>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
      for (; n < ne; ++n) tile<4, 1>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
    }
    for (; m < a.M; ++m) {
      const float* x = a.x + m * a.ldx;
      float* y = a.y + m * a.ldy;
      int64_t n = nb;
      for (; n + 8 <= ne; n += 8) tile<1, 8>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
      for (; n < ne; ++n) tile<1, 1>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
    }
  }
}

MatmulArgs args_of(const TensorView& x, const TensorView& w, const TensorView& y) {
  MatmulArgs a;
  a.x = x.as<const float>();
  a.ldx = x.strides[0];
  a.w = w.data;
  a.w_bf16 = w.dtype == DType::BF16;
  a.ldw = w.strides[0];
  if (w.block_scaled()) {  // fp8: the bf16 kernel over its dequantised rows (matmul_fp8.cpp)
    a.w = nullptr;
    a.w_bf16 = true;
    a.w_fp8 = w.as<const uint8_t>();
    a.w_scales = w.scales;
    a.scale_ld = w.scale_shape()[1];
  }
  a.y = y.as<float>();
  a.ldy = y.strides[0];
  a.M = x.dim(0);
  a.K = x.dim(1);
  return a;
}

}  // namespace

void matmul_cols(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.w_fp8 != nullptr)
    matmul_cols_fp8(a, n0, n1);
  else if (a.x_bf16 != nullptr)
    matmul_cols_avx512bf16(a, n0, n1);
  else if (use_avx512())
    matmul_cols_avx512(a, n0, n1);
  else
    matmul_cols_avx2(a, n0, n1);
}

// SPECSERVE_ISA=avx512 keeps AVX-512 but not its BF16 dot product (to test that path too).
bool bf16_dot_kernel() {
  static const bool v = use_avx512_bf16() && env_text("SPECSERVE_ISA") != "avx512";
  return v;
}

void matmul_cols_avx2(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.w_bf16)
    cols(a, static_cast<const uint16_t*>(a.w), n0, n1);
  else
    cols(a, static_cast<const float*>(a.w), n0, n1);
}

void matmul(const TensorView& x, const TensorView& w, const TensorView& y) {
  TensorView ws[1] = {w};
  TensorView ys[1] = {y};
  matmul_multi(x, ws, ys);
}

void matmul_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys) {
  SS_CHECK(ws.size() == ys.size(), "matmul_multi: {} weights but {} outputs", ws.size(), ys.size());
  std::vector<MatmulArgs> args;
  std::vector<int64_t> col_start{0};
  for (size_t i = 0; i < ws.size(); ++i) {
    check_matmul_operands(x, ws[i], ys[i]);
    args.push_back(args_of(x, ws[i], ys[i]));
    col_start.push_back(col_start.back() + ws[i].dim(0));
  }
  const int64_t total = col_start.back();
  if (total == 0 || x.dim(0) == 0) return;
  // bf16 weights on AVX512-BF16 machines: x is rounded to bf16 once (element by element, so each
  // row's copy depends only on that row) and the kernel multiplies bf16 pairs.
  std::vector<uint16_t> xb;
  bool any_bf16 = false;
  for (const auto& a : args) any_bf16 |= a.w_bf16;
  if (any_bf16 && bf16_dot_kernel()) {
    const int64_t M = x.dim(0), K = x.dim(1);
    xb.resize(static_cast<size_t>(M * K));
    for (int64_t m = 0; m < M; ++m)
      convert_from_f32(x.as<const float>() + m * x.strides[0], DType::BF16, xb.data() + m * K, static_cast<size_t>(K));
    for (auto& a : args)
      if (a.w_bf16) {
        a.x_bf16 = xb.data();
        a.ldx_bf16 = K;
      }
  }
  // Columns of all weights form one range split statically across threads; each element is
  // computed the same way whichever thread takes it.
  auto body = [&](int64_t c0, int64_t c1) {
    for (size_t i = 0; i < args.size(); ++i) {
      int64_t b = std::max(c0, col_start[i]), e = std::min(c1, col_start[i + 1]);
      if (b < e) matmul_cols(args[i], b - col_start[i], e - col_start[i]);
    }
  };
  const double flops = 2.0 * static_cast<double>(x.dim(0)) * static_cast<double>(total) * static_cast<double>(x.dim(1));
  if (flops < 2e5)
    body(0, total);
  else
    ThreadPool::global().parallel_for(total, body, 16);
}

}  // namespace specserve::cpu
