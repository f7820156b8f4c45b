#pragma once
// The OpenAI request schemas of /v1/chat/completions and /v1/completions, validated into plain
// structs. Everything a client can get wrong is reported here as a 400 naming the field, before
// the request costs any tokenizer or engine work. The sampling fields (temperature, top_p,
// penalties, logit_bias, seed, ...) are validated here for type and range (so the 400 names the
// field); the sampling layer's own parser (sampling/request_json.h) then builds SamplingParams
// from the same body (loaded_model.cpp).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specserve::server {

// Limits a request is checked against (from the server options and the loaded model).
struct RequestLimits {
  int64_t max_tokens_limit = 32768;  // largest max_tokens accepted
  int64_t default_max_tokens = 256;  // used when the request gives none
  int64_t vocab_size = 0;            // token ids (prompt ids, logit_bias keys) must be below this
  int max_stop_strings = 16;
  int max_stop_string_bytes = 256;
  int max_top_logprobs = 20;
  int max_messages = 4096;
};

// Fields shared by both endpoints.
struct CommonRequest {
  std::string model;  // "" when absent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int64_t max_tokens = 0;      // resolved: request value or the default
  bool max_tokens_given = false;
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  bool ignore_eos = false;
  // The request body the fields came from (for the sampling parser); valid while the handler runs.
  const nlohmann::json* body = nullptr;
};

struct ChatRequest : CommonRequest {
  nlohmann::json messages;     // validated array, normalised (text parts joined into strings)
  nlohmann::json tools;        // array or null
  bool tools_enabled = false;  // tools present and tool_choice != "none"
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
};

struct CompletionRequest : CommonRequest {
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_tokens;  // when the prompt is given as token ids
  bool echo = false;
};

ChatRequest parse_chat_request(const nlohmann::json& body, const RequestLimits& limits);
CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits);

}  // namespace specserve::server
