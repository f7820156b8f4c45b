// libFuzzer target: the server's parsing of untrusted input. Any bytes must end in a parsed value
// or a 4xx ApiError — never a crash, sanitizer report, hang or uncaught exception of another type.
//   mode 0: a /v1/chat/completions body → ChatRequest
//   mode 1: a /v1/completions body → CompletionRequest
//   mode 2: model output text → tool calls (hermes JSON and qwen3_coder XML) and <think> splitting,
//           also checking that chunked (streamed) splitting gives exactly the one-shot result.
//
// The fuzz build compiles only core/io/tokenizer/chat (src/CMakeLists.txt): the server library
// needs cpp-httplib, which the clang build does not link. The parsing files below depend only on
// nlohmann/json and core, so they are compiled into this target directly.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/api_error.cpp"
#include "server/json_fields.cpp"
#include "server/openai_request.cpp"
#include "server/reasoning_splitter.cpp"
#include "server/tool_calls.cpp"

namespace {

using namespace specserve::server;

const nlohmann::json& tools() {
  static const nlohmann::json t = nlohmann::json::parse(R"([{"type":"function","function":{"name":"f",
      "parameters":{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},
      "o":{"type":"object"},"b":{"type":"boolean"}}}}}])");
  return t;
}

void parse_request(std::string_view body, bool chat) {
  RequestLimits limits;
  limits.vocab_size = 1000;
  limits.max_tokens_limit = 4096;
  limits.default_max_tokens = 16;
  try {
    nlohmann::json j = parse_json_body(std::string(body));
    if (chat) {
      ChatRequest r = parse_chat_request(j, limits);
      (void)r.messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      parse_completion_request(j, limits);
    }
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) std::abort();
    (void)error_body(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

void parse_output(std::string_view text, size_t chunk) {
  // Tool calls: one shot vs streamed.
  ToolCallParse whole = parse_tool_calls(text, &tools());
  ToolCallStream stream(&tools());
  std::string released;
  for (size_t i = 0; i < text.size(); i += chunk) released += stream.feed(text.substr(i, chunk));
  ToolCallParse tail = stream.finish();
  if (whole.calls.size() != tail.calls.size()) std::abort();
  for (const auto& c : whole.calls) {
    if (!nlohmann::json::accept(c.arguments)) std::abort();  // arguments are always JSON
  }
  // <think> splitting: chunked == one shot, for every start mode.
  for (ReasoningStart start : {ReasoningStart::Detect, ReasoningStart::Inside, ReasoningStart::Off}) {
    ReasoningSplitter one(start), many(start);
    SplitText a = one.feed(text), a2 = one.finish();
    std::string r, c;
    for (size_t i = 0; i < text.size(); i += chunk) {
      SplitText p = many.feed(text.substr(i, chunk));
      r += p.reasoning;
      c += p.content;
    }
    SplitText p = many.finish();
    r += p.reasoning;
    c += p.content;
    if (r != a.reasoning + a2.reasoning || c != a.content + a2.content) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);
  switch (data[0] % 3) {
    case 0: parse_request(input, true); break;
    case 1: parse_request(input, false); break;
    case 2: parse_output(input, 1 + data[1] % 16); break;
  }
  return 0;
}
