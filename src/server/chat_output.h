#pragma once
// Turns engine output events of one chat request into OpenAI objects: `chat.completion.chunk`s
// while streaming, or one `chat.completion` at the end. Both paths run the same splitting
// (reasoning → reasoning_content, <tool_call> blocks → tool_calls), so a streamed answer
// concatenates to exactly the non-streamed one.
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/result_stream.h"
#include "server/reasoning_splitter.h"
#include "server/tool_calls.h"

namespace specserve::server {

struct OutputOptions {
  std::string id;     // "chatcmpl-…" / "cmpl-…"
  std::string model;  // served model name
  int64_t created = 0;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
  ReasoningStart reasoning = ReasoningStart::Detect;  // from the rendered prompt
  const nlohmann::json* tools = nullptr;              // enables tool-call parsing (request's tools array)
  // Raw bytes of a token (for logprobs "token"/"bytes"); required when logprobs is set.
  std::function<std::string(int32_t)> token_bytes;
};

// OpenAI finish_reason for an engine finish.
const char* openai_finish_reason(engine::FinishReason r);

// The OpenAI "logprobs.content" entries for tokens (chat form).
nlohmann::json chat_logprobs_content(const std::vector<engine::TokenLogprob>& lps, int top_n,
                                     const std::function<std::string(int32_t)>& token_bytes);

// The OpenAI usage object: prompt, completion and total tokens, and prompt_tokens_details.cached_tokens
// (prompt tokens served from the prefix cache).
nlohmann::json usage_json(const engine::Usage& u);

class ChatOutput {
 public:
  explicit ChatOutput(OutputOptions options);

  // Consumes one engine event. When streaming, appends the chunks to send to `chunks`.
  void consume(const engine::StreamEvent& event, std::vector<nlohmann::json>* chunks);
  bool finished() const { return finished_; }
  // The error text when the request finished with an engine error.
  const std::optional<std::string>& error() const { return error_; }
  // The non-streaming response (after the finishing event).
  nlohmann::json response() const;

 private:
  nlohmann::json chunk(nlohmann::json delta, const nlohmann::json& finish_reason) const;
  void emit_text(const SplitText& split, std::vector<nlohmann::json>* chunks, nlohmann::json logprobs);

  OutputOptions opt_;
  ReasoningSplitter splitter_;
  std::optional<ToolCallStream> tools_;
  bool sent_role_ = false;
  bool finished_ = false;
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
  nlohmann::json logprobs_ = nlohmann::json::array();
  std::string finish_reason_ = "stop";
  engine::Usage usage_;
  std::optional<std::string> error_;
};

}  // namespace specserve::server
