#pragma once
// Token logprobs for the OpenAI `logprobs` / `top_logprobs` fields. Which distribution they come
// from is SamplingParams::logprobs_source (sampling_params.h); these helpers compute either one.
#include <span>
#include <vector>

#include "sampling/candidates.h"
#include "sampling/types.h"

namespace specserve::sampling {

struct TokenLogprob {
  TokenId id = 0;
  float logprob = 0.0f;
};

struct Logprobs {
  float chosen = 0.0f;            // the emitted token's logprob (−inf if it had probability 0)
  std::vector<TokenLogprob> top;  // best first by (logprob desc, id asc); at most the asked-for n
};

// log-softmax over every finite entry of `logits`, for `chosen` and the best `top_n` ids.
Logprobs logprobs_over_row(std::span<const float> logits, TokenId chosen, int top_n);

// log of a distribution given by unnormalised weights of the candidates (dense over the row when
// cands.all, else aligned with cands.ids; `total` their sum): the exact distribution a token was
// drawn from. Ids outside the candidates have logprob −inf and are never listed.
Logprobs logprobs_over_candidates(std::span<const float> logits, const Candidates& cands,
                                  std::span<const float> weights, double total, TokenId chosen, int top_n);

}  // namespace specserve::sampling
