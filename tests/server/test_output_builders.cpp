// chat.completion(.chunk) and text_completion builders: streamed chunks concatenate to the
// non-streamed response; role chunk first, finish chunk, usage chunk, reasoning and tool calls.
#include <gtest/gtest.h>

#include "server/chat_output.h"
#include "server/completion_output.h"

using namespace specserve;
using namespace specserve::server;
using nlohmann::json;

namespace {
std::vector<engine::StreamEvent> events(const std::vector<std::string>& pieces, engine::FinishReason reason) {
  std::vector<engine::StreamEvent> evs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    engine::StreamEvent e;
    e.tokens = {static_cast<int32_t>(i)};
    e.text = pieces[i];
    evs.push_back(e);
  }
  evs.back().finished = true;
  evs.back().finish_reason = reason;
  evs.back().usage = {7, static_cast<int64_t>(pieces.size())};
  return evs;
}

OutputOptions options() {
  OutputOptions o;
  o.id = "chatcmpl-test";
  o.model = "tiny";
  o.created = 123;
  o.token_bytes = [](int32_t t) { return "t" + std::to_string(t); };
  return o;
}
}  // namespace

TEST(ChatOutput, StreamMatchesNonStream) {
  auto evs = events({"<think>", "hmm", "</think>", "\n\nHel", "lo"}, engine::FinishReason::Stop);
  OutputOptions o = options();
  o.include_usage = true;
  ChatOutput streamed(o), whole(o);
  std::vector<json> chunks;
  for (const auto& e : evs) {
    streamed.consume(e, &chunks);
    whole.consume(e, nullptr);
  }
  ASSERT_GE(chunks.size(), 4u);
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  std::string content, reasoning;
  json finish;
  for (const auto& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], "chatcmpl-test");
    EXPECT_TRUE(c.contains("usage"));
    if (c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Hello");
  EXPECT_EQ(reasoning, "hmm");
  EXPECT_EQ(finish, "stop");
  // The last chunk carries usage and no choices.
  EXPECT_TRUE(chunks.back()["choices"].empty());
  EXPECT_EQ(chunks.back()["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 5);
  EXPECT_EQ(chunks.back()["usage"]["total_tokens"], 12);

  json r = whole.response();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["content"], content);
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], reasoning);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"]["total_tokens"], 12);
}

TEST(ChatOutput, NoUsageFieldWithoutIncludeUsage) {
  ChatOutput out(options());
  std::vector<json> chunks;
  for (const auto& e : events({"a"}, engine::FinishReason::Length)) out.consume(e, &chunks);
  for (const auto& c : chunks) EXPECT_FALSE(c.contains("usage"));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
}

TEST(ChatOutput, ToolCallsStreamedAndFinishReason) {
  json tools = json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  OutputOptions o = options();
  o.tools = &tools;
  ChatOutput streamed(o), whole(o);
  std::vector<json> chunks;
  auto evs = events({"Ok.", "<tool_call>\n{\"name\": \"f\", ", "\"arguments\": {\"x\": 1}}\n</tool_call>"},
                    engine::FinishReason::Stop);
  for (const auto& e : evs) {
    streamed.consume(e, &chunks);
    whole.consume(e, nullptr);
  }
  int calls = 0;
  for (const auto& c : chunks) {
    if (c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) EXPECT_EQ(d["content"].get<std::string>().find("<tool_call>"), std::string::npos);
    if (d.contains("tool_calls")) {
      ++calls;
      EXPECT_EQ(d["tool_calls"][0]["function"]["name"], "f");
      EXPECT_EQ(d["tool_calls"][0]["index"], 0);
    }
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  json r = whole.response();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Ok.");
  EXPECT_EQ(json::parse(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>())["x"],
            1);
}

TEST(ChatOutput, Logprobs) {
  OutputOptions o = options();
  o.logprobs = true;
  o.top_logprobs = 1;
  ChatOutput out(o);
  engine::StreamEvent e;
  e.tokens = {3};
  e.text = "t3";
  e.logprobs = {{3, -0.5f, {{3, -0.5f}, {4, -1.0f}}}};
  e.finished = true;
  std::vector<json> chunks;
  out.consume(e, &chunks);
  json r = out.response();
  const json& lp = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 1u);
  EXPECT_EQ(lp[0]["token"], "t3");
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 1u);
  EXPECT_EQ(lp[0]["bytes"], (json{116, 51}));
}

TEST(ChatOutput, EngineErrorIsReported) {
  ChatOutput out(options());
  engine::StreamEvent e;
  e.finished = true;
  e.finish_reason = engine::FinishReason::Error;
  e.error = "boom";
  out.consume(e, nullptr);
  ASSERT_TRUE(out.error().has_value());
  EXPECT_EQ(*out.error(), "boom");
}

TEST(CompletionOutput, EchoAndStreamEquivalence) {
  OutputOptions o = options();
  o.include_usage = true;
  CompletionOutput streamed(o, "Q: "), whole(o, "Q: ");
  std::vector<json> chunks;
  for (const auto& e : events({"A", "B"}, engine::FinishReason::Length)) {
    streamed.consume(e, &chunks);
    whole.consume(e, nullptr);
  }
  std::string text;
  for (const auto& c : chunks) {
    EXPECT_EQ(c["object"], "text_completion");
    if (!c["choices"].empty()) text += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Q: AB");
  json r = whole.response();
  EXPECT_EQ(r["choices"][0]["text"], "Q: AB");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 2);
}

// usage.prompt_tokens_details.cached_tokens (the OpenAI field) carries Usage::cached_tokens, in the
// final usage chunk of a stream and in the whole response, for chat and completions alike.
TEST(OutputUsage, CachedTokensInStreamAndResponse) {
  auto evs = events({"a", "b", "c"}, engine::FinishReason::Length);
  evs.back().usage.cached_tokens = 5;
  OutputOptions o = options();
  o.include_usage = true;
  ChatOutput chat_streamed(o), chat_whole(o);
  CompletionOutput comp_streamed(o, ""), comp_whole(o, "");
  std::vector<json> chat_chunks, comp_chunks;
  for (const auto& e : evs) {
    chat_streamed.consume(e, &chat_chunks);
    chat_whole.consume(e, nullptr);
    comp_streamed.consume(e, &comp_chunks);
    comp_whole.consume(e, nullptr);
  }
  for (const json& u : {chat_chunks.back()["usage"], comp_chunks.back()["usage"], chat_whole.response()["usage"],
                        comp_whole.response()["usage"]}) {
    EXPECT_EQ(u["prompt_tokens"], 7) << u;
    EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 5) << u;
    EXPECT_EQ(u["total_tokens"], 10) << u;
  }
  // Chunks before the last carry "usage": null, never details of their own.
  EXPECT_TRUE(chat_chunks.front()["usage"].is_null());
  EXPECT_TRUE(comp_chunks.front()["usage"].is_null());

  // Without a cache hit the field is present and zero.
  auto cold = events({"a"}, engine::FinishReason::Stop);
  ChatOutput c(options());
  c.consume(cold.back(), nullptr);
  EXPECT_EQ(c.response()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}
