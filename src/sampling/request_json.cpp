#include "sampling/request_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace specserve::sampling {
namespace {

using nlohmann::json;

// The field's value, or nullptr when absent or null (keep the default).
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

float as_float(const json& v, const char* name) {
  SS_CHECK(v.is_number(), "{} must be a number", name);
  const double d = v.get<double>();
  SS_CHECK(std::isfinite(d) && std::abs(d) <= std::numeric_limits<float>::max(), "{} is out of range", name);
  return static_cast<float>(d);
}

int64_t as_int(const json& v, const char* name, int64_t lo, int64_t hi) {
  SS_CHECK(v.is_number_integer(), "{} must be an integer", name);
  SS_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
           "{} is out of range", name);
  const int64_t i = v.get<int64_t>();
  SS_CHECK(i >= lo && i <= hi, "{} must be in [{}, {}], got {}", name, lo, hi, i);
  return i;
}

bool as_bool(const json& v, const char* name) {
  SS_CHECK(v.is_boolean(), "{} must be true or false", name);
  return v.get<bool>();
}

std::string as_string(const json& v, const char* name) {
  SS_CHECK(v.is_string(), "{} must be a string", name);
  return v.get<std::string>();
}

// A string or a list of strings.
std::vector<std::string> as_strings(const json& v, const char* name) {
  if (v.is_string()) return {v.get<std::string>()};
  SS_CHECK(v.is_array(), "{} must be a string or a list of strings", name);
  std::vector<std::string> out;
  for (const auto& item : v) out.push_back(as_string(item, name));
  return out;
}

std::vector<TokenId> as_token_ids(const json& v, const char* name) {
  SS_CHECK(v.is_array(), "{} must be a list of token ids", name);
  std::vector<TokenId> out;
  for (const auto& item : v) {
    out.push_back(static_cast<TokenId>(as_int(item, name, 0, std::numeric_limits<TokenId>::max())));
  }
  return out;
}

std::vector<std::pair<TokenId, float>> parse_logit_bias(const json& v) {
  SS_CHECK(v.is_object(), "logit_bias must be an object mapping token ids to biases");
  std::vector<std::pair<TokenId, float>> out;
  for (const auto& [key, value] : v.items()) {
    TokenId id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    SS_CHECK(ec == std::errc() && end == key.data() + key.size() && id >= 0, "logit_bias: key '{}' is not a token id",
             key);
    const float bias = as_float(value, "logit_bias value");
    SS_CHECK(bias >= -100.0f && bias <= 100.0f, "logit_bias: bias for token {} must be in [-100, 100], got {}", id,
             bias);
    out.emplace_back(id, bias);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Stage> parse_order(const json& v) {
  if (v.is_string()) return parse_stage_order(v.get<std::string>());
  SS_CHECK(v.is_array(), "sampler_order must be a list of stage names or a comma-separated string");
  std::vector<Stage> out;
  for (const auto& item : v) out.push_back(parse_stage(as_string(item, "sampler_order")));
  return out;
}

void parse_logprobs(const json& body, SamplingParams& s) {
  if (const json* v = field(body, "logprobs")) {
    if (v->is_boolean()) {
      s.logprobs = v->get<bool>();
    } else {  // legacy /v1/completions: logprobs = n means "the top n"
      SS_CHECK(v->is_number_integer(), "logprobs must be true/false (or an integer in the completions API)");
      s.top_logprobs = static_cast<int>(as_int(*v, "logprobs", 0, 20));
      s.logprobs = true;
    }
  }
  if (const json* v = field(body, "top_logprobs")) s.top_logprobs = static_cast<int>(as_int(*v, "top_logprobs", 0, 20));
  SS_CHECK(s.top_logprobs == 0 || s.logprobs, "top_logprobs needs logprobs to be true");
  if (!s.logprobs) s.top_logprobs = 0;
  if (const json* v = field(body, "logprobs_mode")) {
    const std::string mode = as_string(*v, "logprobs_mode");
    if (mode == "before_truncation")
      s.logprobs_source = LogprobsSource::kBeforeTruncation;
    else if (mode == "final")
      s.logprobs_source = LogprobsSource::kFinal;
    else
      fail("logprobs_mode must be \"before_truncation\" or \"final\", got \"{}\"", mode);
  }
}

void parse_dry(const json& body, DryParams& d) {
  if (const json* v = field(body, "dry_multiplier")) d.multiplier = as_float(*v, "dry_multiplier");
  if (const json* v = field(body, "dry_base")) d.base = as_float(*v, "dry_base");
  if (const json* v = field(body, "dry_allowed_length")) {
    d.allowed_length = static_cast<int>(as_int(*v, "dry_allowed_length", 1, std::numeric_limits<int>::max()));
  }
  if (const json* v = field(body, "dry_penalty_last_n")) {
    d.penalty_last_n = static_cast<int>(as_int(*v, "dry_penalty_last_n", -1, std::numeric_limits<int>::max()));
  }
  if (const json* v = field(body, "dry_sequence_breakers")) {
    SS_CHECK(v->is_array(), "dry_sequence_breakers must be a list of strings");
    d.sequence_breaker_strings = as_strings(*v, "dry_sequence_breakers");
    for (const auto& s : d.sequence_breaker_strings) SS_CHECK(!s.empty(), "dry_sequence_breakers: empty string");
    d.sequence_breakers.clear();  // the caller re-tokenizes the new strings
  }
}

}  // namespace

RequestParams parse_request_params(const json& body, const RequestParams& defaults) {
  SS_CHECK(body.is_object(), "request body must be a JSON object");
  RequestParams out = defaults;
  SamplingParams& s = out.sampling;
  StopParams& stop = out.stop;

  if (const json* v = field(body, "temperature")) s.temperature = as_float(*v, "temperature");
  if (const json* v = field(body, "top_p")) s.top_p = as_float(*v, "top_p");
  if (const json* v = field(body, "top_k")) {
    const int64_t k = as_int(*v, "top_k", -1, std::numeric_limits<int>::max());
    s.top_k = k < 0 ? 0 : static_cast<int>(k);
  }
  if (const json* v = field(body, "min_p")) s.min_p = as_float(*v, "min_p");
  if (const json* v = field(body, "top_n_sigma")) s.top_n_sigma = std::max(0.0f, as_float(*v, "top_n_sigma"));
  if (const json* v = field(body, "repetition_penalty")) s.repetition_penalty = as_float(*v, "repetition_penalty");
  if (const json* v = field(body, "repetition_window")) {
    const int64_t w = as_int(*v, "repetition_window", -1, std::numeric_limits<int>::max());
    s.repetition_window = w < 0 ? 0 : static_cast<int>(w);
  }
  if (const json* v = field(body, "presence_penalty")) s.presence_penalty = as_float(*v, "presence_penalty");
  if (const json* v = field(body, "frequency_penalty")) s.frequency_penalty = as_float(*v, "frequency_penalty");
  if (const json* v = field(body, "logit_bias")) s.logit_bias = parse_logit_bias(*v);
  if (const json* v = field(body, "seed")) {
    SS_CHECK(v->is_number_integer(), "seed must be an integer");
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = field(body, "sampler_order")) s.order = parse_order(*v);
  parse_dry(body, s.dry);
  parse_logprobs(body, s);

  if (const json* v = field(body, "stop")) stop.stop = as_strings(*v, "stop");
  if (const json* v = field(body, "stop_token_ids")) stop.stop_token_ids = as_token_ids(*v, "stop_token_ids");
  if (const json* v = field(body, "max_tokens")) {
    stop.max_tokens = as_int(*v, "max_tokens", 1, std::numeric_limits<int64_t>::max());
  }
  if (const json* v = field(body, "max_completion_tokens")) {
    stop.max_tokens = as_int(*v, "max_completion_tokens", 1, std::numeric_limits<int64_t>::max());
  }
  if (const json* v = field(body, "min_tokens")) {
    stop.min_tokens = static_cast<int>(as_int(*v, "min_tokens", 0, std::numeric_limits<int>::max()));
  }
  if (const json* v = field(body, "ignore_eos")) stop.ignore_eos = as_bool(*v, "ignore_eos");

  validate(out);
  return out;
}

}  // namespace specserve::sampling
