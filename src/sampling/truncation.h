#pragma once
// The shaping stages (T > 0): temperature and the truncations top-k, top-p, min-p, top-n-sigma.
//
// They work on a candidate list — the ids still allowed, always in ascending id order — over a dense
// logits row. Truncation only ever shrinks the list, so a stage that follows top-k costs O(k), not
// O(V). Every rank-based decision uses the total order (logit descending, id ascending): ties are
// broken by id, never by the sort algorithm, so the result depends only on the values.
//
// Differences from Hugging Face's warpers, all on measure-zero inputs: HF top-k keeps every token
// tied with the k-th (here: exactly k), and HF top-p / min-p compute in f32 where these compute
// the mass in f64; the reference tests use inputs away from such boundaries.
#include <span>
#include <vector>

#include "sampling/types.h"

namespace specserve::sampling {

// Scratch reused across calls.
struct TruncationScratch {
  std::vector<TokenId> order;
  std::vector<float> weights;
};

// logit /= temperature for every candidate.
void apply_temperature(std::span<float> logits, std::span<const TokenId> candidates, float temperature);

// Keeps the k best candidates. k <= 0 or k >= size: unchanged.
void truncate_top_k(std::span<const float> logits, std::vector<TokenId>& candidates, int k,
                    TruncationScratch& scratch);

// Keeps candidates, best first, while the probability mass before them is < top_p (the smallest
// prefix whose mass reaches top_p; at least one). top_p >= 1: unchanged.
void truncate_top_p(std::span<const float> logits, std::vector<TokenId>& candidates, float top_p,
                    TruncationScratch& scratch);

// Keeps candidates whose probability is >= min_p × the largest probability (the argmax always
// stays). min_p <= 0: unchanged.
void truncate_min_p(std::span<const float> logits, std::vector<TokenId>& candidates, float min_p);

// Keeps candidates with logit >= max − n·σ, σ the population standard deviation of the candidates'
// logits (Tang et al., "Top-nσ"; llama.cpp semantics). n <= 0: unchanged.
void truncate_top_n_sigma(std::span<const float> logits, std::vector<TokenId>& candidates, float n);

// The candidate with the largest logit; ties go to the lowest id. Candidates must be non-empty.
TokenId best_candidate(std::span<const float> logits, std::span<const TokenId> candidates);

// The largest logit among the candidates.
float max_logit(std::span<const float> logits, std::span<const TokenId> candidates);

}  // namespace specserve::sampling
