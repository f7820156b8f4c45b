#pragma once
// The sampling and stopping fields of an OpenAI-style request body (/v1/chat/completions,
// /v1/completions), with the common extensions (vLLM / llama.cpp names). Fields that are absent or
// null keep the value from `defaults` (the server's, usually from generation_config.json).
//
// OpenAI: temperature, top_p, presence_penalty, frequency_penalty, logit_bias {"id": bias},
//   seed, stop (string or list), max_tokens / max_completion_tokens (the latter wins),
//   logprobs (bool; an integer n in the legacy completions API = top n), top_logprobs.
// Extensions: top_k (−1 or 0: off), min_p, top_n_sigma (≤ 0: off), repetition_penalty,
//   repetition_window, min_tokens, ignore_eos, stop_token_ids, dry_multiplier, dry_base,
//   dry_allowed_length, dry_penalty_last_n, dry_sequence_breakers (list of strings),
//   sampler_order (list of stage names or "a,b,c"), logprobs_mode ("before_truncation" | "final").
//
// Errors are specserve::Error with one line naming the field, for a 400 response.
// If the request sets dry_sequence_breakers, dry.sequence_breakers (token ids) is cleared: the
// caller converts dry.sequence_breaker_strings with its tokenizer (dry_breakers.h) before
// constructing the Sampler.
#include <nlohmann/json_fwd.hpp>

#include "sampling/sampling_params.h"

namespace specserve::sampling {

RequestParams parse_request_params(const nlohmann::json& body, const RequestParams& defaults);

}  // namespace specserve::sampling
