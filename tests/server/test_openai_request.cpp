// The OpenAI request schemas: valid requests parse into the expected fields; every kind of bad
// field is a 400 ApiError naming the parameter.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/openai_request.h"

using namespace specserve::server;
using nlohmann::json;

namespace {
RequestLimits limits() {
  RequestLimits l;
  l.vocab_size = 1000;
  l.max_tokens_limit = 4096;
  l.default_max_tokens = 128;
  return l;
}

json chat(json extra = json::object()) {
  json j = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

// Parses and expects a 400 naming `param` (when given).
void expect_bad_chat(const json& body, const std::string& param = "") {
  try {
    parse_chat_request(body, limits());
    ADD_FAILURE() << "accepted: " << body.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body.dump();
    if (!param.empty()) {
      EXPECT_EQ(e.param(), param) << body.dump() << " -> " << e.what();
    }
  }
}
}  // namespace

TEST(OpenAIRequest, ChatDefaults) {
  ChatRequest r = parse_chat_request(chat(), limits());
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.max_tokens, 128);
  EXPECT_FALSE(r.max_tokens_given);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "hi");
  EXPECT_FALSE(r.tools_enabled);
}

TEST(OpenAIRequest, ChatFields) {
  ChatRequest r = parse_chat_request(
      chat({{"stream", true},
            {"stream_options", {{"include_usage", true}}},
            {"max_tokens", 10},
            {"max_completion_tokens", 20},
            {"stop", "END"},
            {"logprobs", true},
            {"top_logprobs", 3},
            {"chat_template_kwargs", {{"enable_thinking", false}}},
            {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::object()}}}}}},
            {"unknown_extension", {1, 2, 3}}}),
      limits());
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 20);  // max_completion_tokens wins
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.tools_enabled);
}

TEST(OpenAIRequest, ContentPartsAndToolMessages) {
  json msgs = {{{"role", "developer"}, {"content", "sys"}},
               {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
               {{"role", "assistant"},
                {"content", nullptr},
                {"tool_calls",
                 {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"x\":1}"}}}}}}},
               {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}};
  ChatRequest r = parse_chat_request(chat({{"messages", msgs}}), limits());
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "ab");
  EXPECT_EQ(r.messages[2]["content"], "");
  // Arguments become a mapping for templates that iterate them (Qwen3.5 XML form).
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
}

TEST(OpenAIRequest, ToolChoiceNoneDisablesParsing) {
  ChatRequest r = parse_chat_request(
      chat({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}, {"tool_choice", "none"}}), limits());
  EXPECT_FALSE(r.tools_enabled);
}

TEST(OpenAIRequest, BadChatRequests) {
  expect_bad_chat(json::array());
  expect_bad_chat(json("text"));
  expect_bad_chat({{"model", "m"}}, "messages");
  expect_bad_chat(chat({{"messages", json::array()}}), "messages");
  expect_bad_chat(chat({{"messages", "hi"}}), "messages");
  expect_bad_chat(chat({{"messages", {1}}}), "messages[0]");
  expect_bad_chat(chat({{"messages", {{{"content", "x"}}}}}), "messages[0].role");
  expect_bad_chat(chat({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), "messages[0].role");
  expect_bad_chat(chat({{"messages", {{{"role", 3}, {"content", "x"}}}}}), "messages[0].role");
  expect_bad_chat(chat({{"messages", {{{"role", "user"}, {"content", 5}}}}}), "messages[0].content");
  expect_bad_chat(chat({{"messages", {{{"role", "user"}}}}}), "messages[0].content");
  expect_bad_chat(chat({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}),
                  "messages[0].content[0].type");
  expect_bad_chat(chat({{"model", 7}}), "model");
  expect_bad_chat(chat({{"stream", "yes"}}), "stream");
  expect_bad_chat(chat({{"stream_options", {{"include_usage", true}}}}), "stream_options");
  expect_bad_chat(chat({{"stream", true}, {"stream_options", {{"include_usage", 1}}}}), "stream_options.include_usage");
  expect_bad_chat(chat({{"max_tokens", -1}}), "max_tokens");
  expect_bad_chat(chat({{"max_tokens", 0}}), "max_tokens");
  expect_bad_chat(chat({{"max_tokens", 1e12}}), "max_tokens");
  expect_bad_chat(chat({{"max_tokens", 5000}}), "max_tokens");
  expect_bad_chat(chat({{"max_tokens", 1.5}}), "max_tokens");
  expect_bad_chat(chat({{"max_tokens", "10"}}), "max_tokens");
  expect_bad_chat(chat({{"max_completion_tokens", -5}}), "max_completion_tokens");
  expect_bad_chat(chat({{"n", 2}}), "n");
  expect_bad_chat(chat({{"temperature", -0.1}}), "temperature");
  expect_bad_chat(chat({{"temperature", 2.5}}), "temperature");
  expect_bad_chat(chat({{"temperature", "hot"}}), "temperature");
  expect_bad_chat(chat({{"top_p", 0}}), "top_p");
  expect_bad_chat(chat({{"top_p", 1.5}}), "top_p");
  expect_bad_chat(chat({{"top_k", -2}}), "top_k");
  expect_bad_chat(chat({{"top_k", 1.5}}), "top_k");
  expect_bad_chat(chat({{"min_p", 2}}), "min_p");
  expect_bad_chat(chat({{"presence_penalty", 3}}), "presence_penalty");
  expect_bad_chat(chat({{"frequency_penalty", -3}}), "frequency_penalty");
  expect_bad_chat(chat({{"repetition_penalty", 0}}), "repetition_penalty");
  expect_bad_chat(chat({{"seed", "abc"}}), "seed");
  expect_bad_chat(chat({{"logit_bias", {{"abc", 1}}}}), "logit_bias");
  expect_bad_chat(chat({{"logit_bias", {{"5000", 1}}}}), "logit_bias");
  expect_bad_chat(chat({{"logit_bias", {{"-1", 1}}}}), "logit_bias");
  expect_bad_chat(chat({{"logit_bias", {{"5", 101}}}}), "logit_bias");
  expect_bad_chat(chat({{"logit_bias", {{"5", "x"}}}}), "logit_bias");
  expect_bad_chat(chat({{"logit_bias", {1, 2}}}), "logit_bias");
  expect_bad_chat(chat({{"stop", 5}}), "stop");
  expect_bad_chat(chat({{"stop", {"a", 5}}}), "stop");
  expect_bad_chat(chat({{"stop", ""}}), "stop");
  expect_bad_chat(chat({{"stop", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
                                              "p", "q"})}}),
                  "stop");
  expect_bad_chat(chat({{"logprobs", 1}}), "logprobs");
  expect_bad_chat(chat({{"top_logprobs", 5}}), "top_logprobs");
  expect_bad_chat(chat({{"logprobs", true}, {"top_logprobs", 50}}), "top_logprobs");
  expect_bad_chat(chat({{"tools", "f"}}), "tools");
  expect_bad_chat(chat({{"tools", {{{"type", "function"}}}}}), "tools[0].function");
  expect_bad_chat(chat({{"tools", {{{"type", "function"}, {"function", {{"name", 1}}}}}}}), "tools[0].function.name");
  expect_bad_chat(chat({{"tool_choice", "required"}}), "tool_choice");
  expect_bad_chat(chat({{"tool_choice", 3}}), "tool_choice");
  expect_bad_chat(chat({{"response_format", {{"type", "json_object"}}}}), "response_format");
  expect_bad_chat(chat({{"chat_template_kwargs", "x"}}), "chat_template_kwargs");
  expect_bad_chat(chat({{"user", 5}}), "user");
  expect_bad_chat(chat({{"messages",
                         {{{"role", "assistant"},
                           {"content", "x"},
                           {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "not json"}}}}}}}}}}),
                  "messages[0].tool_calls[0].function.arguments");
}

TEST(OpenAIRequest, NullMeansAbsent) {
  ChatRequest r =
      parse_chat_request(chat({{"temperature", nullptr}, {"max_tokens", nullptr}, {"stop", nullptr}}), limits());
  EXPECT_EQ(r.max_tokens, 128);
  EXPECT_TRUE(r.stop.empty());
}

TEST(OpenAIRequest, Completions) {
  CompletionRequest r = parse_completion_request({{"prompt", "hello"}, {"echo", true}, {"logprobs", 2}}, limits());
  EXPECT_EQ(*r.prompt_text, "hello");
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  r = parse_completion_request({{"prompt", {1, 2, 3}}}, limits());
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  r = parse_completion_request({{"prompt", {"one"}}}, limits());
  EXPECT_EQ(*r.prompt_text, "one");
  r = parse_completion_request({{"prompt", {{4, 5}}}}, limits());
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{4, 5}));

  for (const json& bad :
       {json{{"model", "m"}}, json{{"prompt", 5}}, json{{"prompt", ""}}, json{{"prompt", json::array()}},
        json{{"prompt", {1, -2}}}, json{{"prompt", {1, 1000}}}, json{{"prompt", {1, 2.5}}},
        json{{"prompt", {"a", "b"}}}, json{{"prompt", "x"}, {"suffix", "y"}}, json{{"prompt", "x"}, {"best_of", 3}},
        json{{"prompt", "x"}, {"logprobs", 50}}, json{{"prompt", "x"}, {"logprobs", true}},
        json{{"prompt", "x"}, {"echo", "no"}}}) {
    EXPECT_THROW(parse_completion_request(bad, limits()), ApiError) << bad.dump();
  }
}

TEST(OpenAIRequest, BodyParsing) {
  EXPECT_NO_THROW(parse_json_body("{}"));
  for (const std::string& bad :
       std::vector<std::string>{"", "{", "{\"a\":", "nul", "{\"a\":1,}", "{\"max_tokens\":1111e1111111111111111111}",
                                "{\"a\":\"\xff\xfe\"}", "{\"a\":\"\xc3\"}", std::string(100, '[')}) {
    try {
      parse_json_body(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
}

TEST(OpenAIRequest, ErrorBodyShape) {
  ApiError e(400, "bad", "invalid_request_error", "top_p");
  json b = error_body(e);
  EXPECT_EQ(b["error"]["message"], "bad");
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "top_p");
  EXPECT_TRUE(b["error"]["code"].is_null());
}
