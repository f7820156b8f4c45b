#pragma once
// A model's sampling defaults from its generation_config.json (Hugging Face), which servers apply
// to requests that leave a field unset (Qwen3: temperature 0.6, top_p 0.95, top_k 20), and its
// EOS ids (an integer or a list).
//
// Read: do_sample (false → greedy, whatever the temperature), temperature, top_k, top_p, min_p,
// repetition_penalty, eos_token_id. Other keys are ignored.
#include <nlohmann/json_fwd.hpp>

#include <vector>

#include "sampling/sampling_params.h"

namespace specserve::sampling {

// Overwrites the fields generation_config.json sets; leaves the rest of `defaults` alone.
void apply_generation_config(const nlohmann::json& config, RequestParams& defaults);

// eos_token_id as found in config.json / generation_config.json: an integer, a list, or null.
std::vector<TokenId> parse_eos_token_ids(const nlohmann::json& value);

}  // namespace specserve::sampling
