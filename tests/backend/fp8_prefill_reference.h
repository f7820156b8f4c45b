#pragma once
// The W8A8 prefill GEMM's math on the host (backend/cuda/matmul_prefill_fp8_sm90a.cu): x's rows quantised by the
// rule of matmul_fp8_act_math.cuh, then per 128-column block of K the exact sum of the code products (e4m3 x e4m3
// products and their sums over one block are exact in double), times f32_rn(a_scale x w_scale), summed over the
// blocks. The GPU sums a block's products on the fp8 tensor cores, whose internal order and (reduced) precision
// the host cannot reproduce, so results are compared within a bound derived from the terms (fp8_prefill_tolerance).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cuda/matmul_fp8_act_math.cuh"

namespace specserve::testing {

namespace fp8a = cuda::fp8a;

// x [M, K] (row stride ldx) quantised: codes [M, K], scales [M, groups] (row-major, not the device's transposed
// layout).
struct QuantisedRows {
  int64_t M = 0, K = 0, groups = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

inline QuantisedRows quantise_rows(const float* x, int64_t ldx, int64_t M, int64_t K) {
  QuantisedRows q;
  q.M = M;
  q.K = K;
  q.groups = fp8a::groups_of(K);
  q.codes.resize(size_t(M * K));
  q.scales.resize(size_t(M * q.groups));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < q.groups; ++g) {
      const int64_t k0 = g * fp8a::kGroup, k1 = std::min(K, k0 + fp8a::kGroup);
      float amax = 0.0f;
      for (int64_t k = k0; k < k1; ++k) amax = std::fmax(amax, std::fabs(x[m * ldx + k]));
      const float s = fp8a::group_scale(amax);
      q.scales[size_t(m * q.groups + g)] = s;
      for (int64_t k = k0; k < k1; ++k) q.codes[size_t(m * K + k)] = fp8a::e4m3_rn_satfinite(x[m * ldx + k] / s);
    }
  return q;
}

// The reference of one output element and the size of its terms: y = Σ_b t_b s_b (in double) and
// bound = Σ_b |s_b| Σ_{k in b} |code_x code_w| (double), with t_b the exact block sum and s_b = f32_rn(a_s w_s).
struct RefElement {
  double y = 0, bound = 0;
};

// w: codes [N, K] (row stride ldw), scales [ceil(N / 128), scale_ld].
inline RefElement fp8_prefill_reference(const QuantisedRows& q, int64_t m, const uint8_t* w, int64_t ldw,
                                        const float* w_scales, int64_t scale_ld, int64_t n) {
  RefElement r;
  for (int64_t b = 0; b < q.groups; ++b) {
    const int64_t k0 = b * fp8a::kGroup, k1 = std::min(q.K, k0 + fp8a::kGroup);
    double t = 0, mag = 0;
    for (int64_t k = k0; k < k1; ++k) {
      const double p = double(fp8a::e4m3_value(q.codes[size_t(m * q.K + k)])) * fp8a::e4m3_value(w[n * ldw + k]);
      t += p;
      mag += std::fabs(p);
    }
    const float s = q.scales[size_t(m * q.groups + b)] * w_scales[(n / 128) * scale_ld + b];
    r.y += t * double(s);
    r.bound += mag * std::fabs(double(s));
  }
  return r;
}

// The allowed |gpu - reference| for an element: 2^-9 of its terms' magnitudes. Hopper's fp8 tensor cores keep
// about 14 significant bits in a block's running sum (DeepSeek-V3's measurement, the reason for the per-block
// promotion): over a block's four k32 steps that is below 2^-11 of Σ|terms|; the f32 promotion adds 2^-24 per
// block. 2^-9 leaves a factor 4; a wrong scale, code or block (the bugs this guards against) is off by O(1/blocks)
// of the bound or more.
inline double fp8_prefill_tolerance(const RefElement& r) { return std::ldexp(r.bound, -9) + 1e-30; }

}  // namespace specserve::testing
