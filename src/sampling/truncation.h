#pragma once
// The shaping stages (T > 0): temperature and the truncations top-k, top-p, min-p, top-n-sigma,
// over a dense logits row and a candidate set (candidates.h).
//
// Every rank-based decision uses the total order (logit descending, id ascending): ties are broken
// by id, never by an algorithm's internals, so the result depends only on the values.
//
// Differences from Hugging Face's warpers, all on measure-zero inputs: HF top-k keeps every token
// tied with the k-th (here: exactly k); HF top-p / min-p compare f32 sums where these compare f64
// sums of a vectorised exp; the reference tests use inputs away from such boundaries.
#include <span>
#include <utility>
#include <vector>

#include "sampling/candidates.h"
#include "sampling/types.h"

namespace specserve::sampling {

// Scratch reused across calls.
struct TruncationScratch {
  std::vector<TokenId> order;
  std::vector<float> weights;      // dense over the row (candidates.all) or aligned with ids
  std::vector<double> block_sums;  // dense weights only
  std::vector<std::pair<float, TokenId>> heap;
  std::vector<double> bucket_mass;
};

// logit /= temperature for every candidate.
void apply_temperature(std::span<float> logits, const Candidates& cands, float temperature);

// Keeps the k best candidates. k <= 0 or k >= size: unchanged.
void truncate_top_k(std::span<const float> logits, Candidates& cands, int k, TruncationScratch& scratch);

// Keeps candidates, best first, while the probability mass ranked before them is < top_p (the
// smallest prefix whose mass reaches top_p; at least one). top_p >= 1: unchanged.
void truncate_top_p(std::span<const float> logits, Candidates& cands, float top_p, TruncationScratch& scratch);

// Keeps candidates whose probability is >= min_p × the largest (the argmax always stays).
// min_p <= 0: unchanged.
void truncate_min_p(std::span<const float> logits, Candidates& cands, float min_p);

// Keeps candidates with logit >= max − n·σ, σ the population standard deviation of the candidates'
// logits (Tang et al., "Top-nσ"; llama.cpp semantics). n <= 0: unchanged.
void truncate_top_n_sigma(std::span<const float> logits, Candidates& cands, float n);

// The largest candidate logit (−inf if there is no candidate).
float max_logit(std::span<const float> logits, const Candidates& cands);

// Softmax weights exp(l − max) of the candidates into scratch.weights (dense over the row when
// cands.all, with scratch.block_sums; else aligned with cands.ids); returns their sum.
double candidate_weights(std::span<const float> logits, const Candidates& cands, float max, TruncationScratch& scratch);

}  // namespace specserve::sampling
