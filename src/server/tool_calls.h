#pragma once
// Tool calls in Qwen output, returned as OpenAI `tool_calls`. Two wire forms inside
// <tool_call>…</tool_call> blocks:
//   Qwen3 (hermes style):  {"name": "get_weather", "arguments": {"city": "Paris"}}
//   Qwen3.5/3.6 (qwen3_coder XML):
//       <function=get_weather>
//       <parameter=city>
//       Paris
//       </parameter>
//       </function>
// XML parameter values are text; they are typed with the request's tool schema (integer, number,
// boolean, object, array → parsed as JSON; string or unknown → kept as text), as vLLM does.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace specserve::server {

struct ToolCall {
  std::string id;  // "call_…"
  std::string name;
  std::string arguments;  // a JSON object, serialised (OpenAI sends arguments as a string)
};

struct ToolCallParse {
  std::string content;  // text outside the blocks (and any block that failed to parse, verbatim)
  std::vector<ToolCall> calls;
};

// Parses complete output text. `tools` is the request's "tools" array (may be null).
ToolCallParse parse_tool_calls(std::string_view text, const nlohmann::json* tools);

// Streaming front end: releases content up to the first <tool_call>, then holds the rest until
// finish() parses it (tool-call arguments are sent as one delta per call).
class ToolCallStream {
 public:
  explicit ToolCallStream(const nlohmann::json* tools) : tools_(tools) {}
  std::string feed(std::string_view content);
  ToolCallParse finish();
  bool in_tool_call() const { return holding_; }

 private:
  const nlohmann::json* tools_;
  std::string pending_;
  bool holding_ = false;
};

}  // namespace specserve::server
