#pragma once
// The arithmetic of the sampled-draft mode of speculative decoding (docs/DFLASH.md §6.3): drafts drawn
// from the drafter's processed distribution q, accepted with probability min(1, p/q), and on
// rejection a sample from the residual norm(max(p − q, 0)). Distribution-exact, not bit-identical
// to plain decoding (that is the argmax-draft mode, which needs only Sampler::pick).
//
// p and q come from Sampler::processed_distribution; each uniform from Sampler::uniform at the
// position being decided, each in its own RandomStream, so the draws never reuse a number.
// Sampling is by inverse CDF in ascending token-id order, like Sampler::pick.
#include <span>

#include "sampling/types.h"

namespace specserve::sampling {

// The first id whose cumulative mass exceeds u · Σ probs (probs need not be normalised).
// Throws if the mass is zero.
TokenId sample_from(std::span<const float> probs, double u);

// Accept a draft d ~ q with probability min(1, p(d) / q(d)): u < p/q, written u·q < p so that
// q(d) = 0 cannot divide by zero.
bool accept_draft(float p_d, float q_d, double u);

// A sample from norm(max(p − q, 0)). If that mass is zero (p ≤ q everywhere, i.e. p = q up to
// rounding, where rejection has probability ~0), it falls back to sampling p.
TokenId sample_residual(std::span<const float> p, std::span<const float> q, double u);

}  // namespace specserve::sampling
