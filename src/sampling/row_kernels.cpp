#include "sampling/row_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <limits>

namespace specserve::sampling {
namespace {

// exp(x) for x ≤ 0 (Cephes expf): x = n·ln2 + r, |r| ≤ ln2/2, e^r by a degree-6 polynomial,
// times 2^n through the exponent bits. Lanes below −87.3 (including −inf) give 0.
__m256 exp_ps(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(scale));
  return _mm256_andnot_ps(too_small, y);
}

// Sum of 8 floats in f64, in a fixed lane order.
double sum8(__m256 v) {
  const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  alignas(32) double d[4];
  _mm256_store_pd(d, _mm256_add_pd(lo, hi));
  return (d[0] + d[1]) + (d[2] + d[3]);
}

}  // namespace

float sanitize_row(std::span<float> row) {
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  const __m256 pos_inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 big = _mm256_set1_ps(FLT_MAX);
  __m256 vmax = neg_inf;
  size_t i = 0;
  for (; i + 8 <= row.size(); i += 8) {
    __m256 v = _mm256_loadu_ps(row.data() + i);
    v = _mm256_blendv_ps(v, neg_inf, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    v = _mm256_blendv_ps(v, big, _mm256_cmp_ps(v, pos_inf, _CMP_EQ_OQ));
    _mm256_storeu_ps(row.data() + i, v);
    vmax = _mm256_max_ps(vmax, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = *std::max_element(lanes, lanes + 8);
  for (; i < row.size(); ++i) {
    float& l = row[i];
    if (l != l)
      l = kNegInf;
    else if (l == std::numeric_limits<float>::infinity())
      l = FLT_MAX;
    m = std::max(m, l);
  }
  return m;
}

float copy_sanitized(std::span<const float> src, std::span<float> dst) {
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  const __m256 pos_inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 big = _mm256_set1_ps(FLT_MAX);
  __m256 vmax = neg_inf;
  size_t i = 0;
  for (; i + 8 <= src.size(); i += 8) {
    __m256 v = _mm256_loadu_ps(src.data() + i);
    v = _mm256_blendv_ps(v, neg_inf, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    v = _mm256_blendv_ps(v, big, _mm256_cmp_ps(v, pos_inf, _CMP_EQ_OQ));
    _mm256_storeu_ps(dst.data() + i, v);
    vmax = _mm256_max_ps(vmax, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = *std::max_element(lanes, lanes + 8);
  for (; i < src.size(); ++i) {
    float l = src[i];
    if (l != l)
      l = kNegInf;
    else if (l == std::numeric_limits<float>::infinity())
      l = FLT_MAX;
    dst[i] = l;
    m = std::max(m, l);
  }
  return m;
}

size_t select_top_k(std::span<const float> row, size_t k, std::vector<std::pair<float, TokenId>>& heap) {
  heap.clear();
  if (k == 0) return 0;
  // Heap order: the front is the worst kept entry. Entries arrive in ascending index order, so an
  // equal value never displaces a kept (lower) index: only strictly greater values enter.
  const auto worse_first = [](const std::pair<float, TokenId>& a, const std::pair<float, TokenId>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t finite = 0, i = 0;
  for (; i < row.size() && heap.size() < k; ++i) {
    if (row[i] == kNegInf) continue;
    ++finite;
    heap.emplace_back(row[i], static_cast<TokenId>(i));
    std::push_heap(heap.begin(), heap.end(), worse_first);
  }
  if (heap.size() < k) return finite;
  float worst = heap.front().first;
  const auto offer = [&](size_t j) {
    if (row[j] <= worst) return;  // the k-th best may have risen within this group
    std::pop_heap(heap.begin(), heap.end(), worse_first);
    heap.back() = {row[j], static_cast<TokenId>(j)};
    std::push_heap(heap.begin(), heap.end(), worse_first);
    worst = heap.front().first;
  };
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  for (; i + 8 <= row.size(); i += 8) {
    const __m256 v = _mm256_loadu_ps(row.data() + i);
    finite += static_cast<size_t>(
        __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, neg_inf, _CMP_NEQ_OQ)))));
    auto gt = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(worst), _CMP_GT_OQ)));
    while (gt != 0) {
      offer(i + static_cast<size_t>(__builtin_ctz(gt)));
      gt &= gt - 1;
    }
  }
  for (; i < row.size(); ++i) {
    if (row[i] == kNegInf) continue;
    ++finite;
    offer(i);
  }
  return finite;
}

float row_max(std::span<const float> row) {
  __m256 vmax = _mm256_set1_ps(kNegInf);
  size_t i = 0;
  // max_ps returns its second operand when either is NaN: with the running max second, NaN
  // entries are skipped.
  for (; i + 8 <= row.size(); i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(row.data() + i), vmax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = *std::max_element(lanes, lanes + 8);
  for (; i < row.size(); ++i) m = std::max(m, row[i]);  // (m < NaN) is false: NaN skipped
  return m;
}

size_t first_index_of(std::span<const float> row, float value) {
  const __m256 v = _mm256_set1_ps(value);
  size_t i = 0;
  for (; i + 8 <= row.size(); i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row.data() + i), v, _CMP_EQ_OQ));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
  for (; i < row.size(); ++i) {
    if (row[i] == value) return i;
  }
  return row.size();
}

void divide_row(std::span<float> row, float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= row.size(); i += 8) {
    _mm256_storeu_ps(row.data() + i, _mm256_div_ps(_mm256_loadu_ps(row.data() + i), d));
  }
  for (; i < row.size(); ++i) row[i] /= divisor;
}

double exp_weights(std::span<const float> row, float max, std::span<float> w, std::vector<double>& block_sums) {
  const size_t n = row.size();
  block_sums.assign((n + kWeightBlock - 1) / kWeightBlock, 0.0);
  const __m256 vmax = _mm256_set1_ps(max);
  double total = 0.0;
  for (size_t b = 0; b * kWeightBlock < n; ++b) {
    const size_t begin = b * kWeightBlock, end = std::min(n, begin + kWeightBlock);
    double sum = 0.0;
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
      const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(row.data() + i), vmax));
      _mm256_storeu_ps(w.data() + i, e);
      sum += sum8(e);
    }
    for (; i < end; ++i) {
      w[i] = exp_nonpositive(row[i] - max);
      sum += w[i];
    }
    block_sums[b] = sum;
    total += sum;
  }
  return total;
}

double exp_sum(std::span<const float> row, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  double total = 0.0;
  size_t i = 0;
  for (; i + 8 <= row.size(); i += 8) total += sum8(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(row.data() + i), vmax)));
  for (; i < row.size(); ++i) total += exp_nonpositive(row[i] - max);
  return total;
}

float exp_nonpositive(float x) {
  alignas(32) float out[8];
  _mm256_store_ps(out, exp_ps(_mm256_set1_ps(x)));
  return out[0];
}

size_t inverse_cdf_blocked(std::span<const float> w, std::span<const double> block_sums, double target) {
  double cum = 0.0;
  for (size_t b = 0; b < block_sums.size(); ++b) {
    if (!(block_sums[b] > 0.0) || cum + block_sums[b] <= target) {
      cum += block_sums[b];
      continue;
    }
    // The target falls in this block: walk it entry by entry.
    const size_t begin = b * kWeightBlock, end = std::min(w.size(), begin + kWeightBlock);
    size_t last_positive = end;
    double c = cum;
    for (size_t i = begin; i < end; ++i) {
      if (w[i] <= 0.0f) continue;
      last_positive = i;
      c += w[i];
      if (c > target) return i;
    }
    return last_positive;  // the running sum rounded below the block's vector sum
  }
  // Rounding left the target at the very top of the mass.
  for (size_t i = w.size(); i-- > 0;) {
    if (w[i] > 0.0f) return i;
  }
  return w.size();
}

}  // namespace specserve::sampling
