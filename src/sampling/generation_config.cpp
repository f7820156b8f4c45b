#include "sampling/generation_config.h"

#include <nlohmann/json.hpp>

#include <limits>

#include "core/error.h"

namespace specserve::sampling {
namespace {

using nlohmann::json;

float number(const json& v, const char* key) {
  SS_CHECK(v.is_number(), "generation_config.json: {} must be a number", key);
  return v.get<float>();
}

}  // namespace

std::vector<TokenId> parse_eos_token_ids(const json& value) {
  std::vector<TokenId> ids;
  const auto add = [&](const json& v) {
    SS_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= std::numeric_limits<TokenId>::max(),
             "eos_token_id must be a token id or a list of token ids");
    ids.push_back(v.get<TokenId>());
  };
  if (value.is_null()) return ids;
  if (value.is_array()) {
    for (const auto& v : value) add(v);
  } else {
    add(value);
  }
  return ids;
}

void apply_generation_config(const json& config, RequestParams& defaults) {
  SS_CHECK(config.is_object(), "generation_config.json must hold a JSON object");
  SamplingParams& s = defaults.sampling;
  const auto get = [&](const char* key) -> const json* {
    auto it = config.find(key);
    return it == config.end() || it->is_null() ? nullptr : &*it;
  };
  if (const json* v = get("temperature")) s.temperature = number(*v, "temperature");
  if (const json* v = get("top_p")) s.top_p = number(*v, "top_p");
  if (const json* v = get("min_p")) s.min_p = number(*v, "min_p");
  if (const json* v = get("repetition_penalty")) s.repetition_penalty = number(*v, "repetition_penalty");
  if (const json* v = get("top_k")) {
    SS_CHECK(v->is_number_integer(), "generation_config.json: top_k must be an integer");
    s.top_k = std::max(0, v->get<int>());
  }
  // Hugging Face samples only with do_sample = true; otherwise generation is greedy.
  if (const json* v = get("do_sample")) {
    SS_CHECK(v->is_boolean(), "generation_config.json: do_sample must be true or false");
    if (!v->get<bool>()) s.temperature = 0.0f;
  }
  if (const json* v = get("eos_token_id")) defaults.stop.eos_token_ids = parse_eos_token_ids(*v);
  with_context("generation_config.json", [&] { validate(defaults); });
}

}  // namespace specserve::sampling
