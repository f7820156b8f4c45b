#pragma once
// Whole-row loops of the sampler, vectorised with AVX2 (the project's baseline ISA), because a
// Qwen row has 151,936 entries and a verify step samples up to 16 rows.
//
// Each function is one fixed sequence of operations — no run-time dispatch, no threads — so its
// result bits depend only on its input: the same row gives the same pick in decode and in verify.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "sampling/types.h"

namespace specserve::sampling {

// NaN → −inf and +inf → FLT_MAX, in place; returns the largest entry (−inf if none is finite).
float sanitize_row(std::span<float> row);
// The same, copying src into dst (same size) on the way.
float copy_sanitized(std::span<const float> src, std::span<float> dst);

// The largest entry, ignoring NaN (−inf if there is none).
float row_max(std::span<const float> row);

// The lowest index holding exactly `value`, or row.size().
size_t first_index_of(std::span<const float> row, float value);

// row[i] /= divisor (a true division, bit-identical to the scalar one).
void divide_row(std::span<float> row, float divisor);

// The best k entries of the row by (value desc, index asc), ignoring −inf, into `heap` (unordered);
// returns how many entries are finite. Most entries cost one vector compare against the current
// k-th best.
size_t select_top_k(std::span<const float> row, size_t k, std::vector<std::pair<float, TokenId>>& heap);

// Softmax weights in blocks: w[i] = exp(row[i] − max) (0 where row[i] = −inf); block_sums[b] is
// the f64 sum of block b (kWeightBlock entries); returns the sum of the block sums, in order.
inline constexpr size_t kWeightBlock = 256;
double exp_weights(std::span<const float> row, float max, std::span<float> w, std::vector<double>& block_sums);

// Σ exp(row[i] − max) in f64 without storing the weights (same arithmetic as exp_weights).
double exp_sum(std::span<const float> row, float max);

// exp(x) for x ≤ 0 with exactly the arithmetic exp_weights uses (a Cephes-style polynomial,
// within 2 ulp of expf; 0 below −87.3).
float exp_nonpositive(float x);

// Inverse CDF over block-summed weights: the first index where the running sum exceeds `target`
// (blocks skipped whole by their sums). Returns the last index with positive weight if rounding
// leaves the target at the very top of the mass.
size_t inverse_cdf_blocked(std::span<const float> w, std::span<const double> block_sums, double target);

}  // namespace specserve::sampling
