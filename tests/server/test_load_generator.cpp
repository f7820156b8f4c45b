// The load generator (`specserve bench serve-load`) and its small HTTP client against the
// in-process server with the scripted model: every request streams and is counted, tokens and
// latencies are measured, errors are reported (a wrong API key), the model id is discovered.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "scripted_server.h"
#include "server/http_client.h"
#include "server/load_generator.h"

using namespace specserve;
using namespace specserve::server;

TEST(LoadGenerator, StreamsEveryRequestAndMeasuresIt) {
  test::Fixture f;
  f.ready();
  LoadGeneratorOptions o;
  o.port = f.port;
  o.requests = 12;
  o.max_tokens = 5;
  o.prompt_words = 8;
  EXPECT_EQ(discover_model(o), "scripted");
  o.model = "scripted";
  LevelResult r = run_load_level(o, 4);
  EXPECT_EQ(r.requests, 12);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.output_tokens, 12 * 5);  // the scripted model honours max_tokens
  EXPECT_GT(r.prompt_tokens, 0);
  EXPECT_GT(r.ttft_mean, 0);
  EXPECT_GT(r.tokens_per_s, 0);
}

TEST(LoadGenerator, ReportsHttpErrors) {
  ServerOptions so;
  so.api_key = "right";
  test::Fixture f(so);
  f.ready();
  LoadGeneratorOptions o;
  o.port = f.port;
  o.api_key = "wrong";
  o.model = "scripted";
  o.requests = 2;
  LevelResult r = run_load_level(o, 1);
  EXPECT_EQ(r.errors, 2);
  EXPECT_NE(r.first_error.find("HTTP 401"), std::string::npos) << r.first_error;
}

TEST(HttpClient, ContentLengthChunkedAndRefusedConnections) {
  test::Fixture f;
  f.ready();
  HttpClientRequest get;
  get.path = "/health";
  HttpClientResponse r = http_fetch("127.0.0.1", f.port, get, 10);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"ok"})");
  EXPECT_EQ(r.error, "");

  HttpClientRequest post;
  post.method = "POST";
  post.path = "/v1/completions";
  post.headers = {{"Content-Type", "application/json"}};
  post.body = R"({"prompt":"x","max_tokens":4,"stream":true})";
  std::string streamed;
  r = http_fetch("127.0.0.1", f.port, post, 10, [&](const char* d, size_t n) {
    streamed.append(d, n);
    return true;
  });
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.error, "");
  EXPECT_NE(streamed.find("\"text\":\"H\""), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]\n\n"), std::string::npos) << streamed;

  const int port = f.port;
  f.server->stop();
  r = http_fetch("127.0.0.1", port, get, 2);
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
}

// --- Workloads (shared-prefix, multi-turn, capacity): request construction, then each against the
// scripted model, whose prefix-cache imitation counts whole 16-byte blocks shared with earlier prompts.

namespace {
using nlohmann::json;

int words_in(const std::string& s) {
  int n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool space = c == ' ' || c == '\n';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

LoadGeneratorOptions scripted_options(const test::Fixture& f) {
  LoadGeneratorOptions o;
  o.port = f.port;
  o.model = "scripted";
  o.max_tokens = 5;
  o.prompt_words = 8;
  return o;
}
}  // namespace

TEST(LoadWorkloads, SyntheticTextIsAFunctionOfItsSeed) {
  EXPECT_EQ(synthetic_text(7, 50), synthetic_text(7, 50));
  EXPECT_NE(synthetic_text(7, 50), synthetic_text(8, 50));
  EXPECT_EQ(words_in(synthetic_text(7, 50)), 50);
  EXPECT_EQ(parse_workload("multi-turn"), Workload::MultiTurn);
  EXPECT_STREQ(workload_name(parse_workload("shared-prefix")), "shared-prefix");
  EXPECT_THROW(parse_workload("everything"), Error);
}

TEST(LoadWorkloads, RandomPromptsDifferAcrossRequestsAndLevels) {
  LoadGeneratorOptions o;
  o.level_salt = 1;
  const std::string a = completion_body(o, 0)["prompt"], b = completion_body(o, 1)["prompt"];
  o.level_salt = 2;
  const std::string c = completion_body(o, 0)["prompt"];
  // Within the first 16 characters (one cache block of the scripted model's byte tokens).
  EXPECT_NE(a.substr(0, 16), b.substr(0, 16));
  EXPECT_NE(a.substr(0, 16), c.substr(0, 16));
  EXPECT_EQ(completion_body(o, 0)["stream"], true);
  EXPECT_EQ(completion_body(o, 0)["stream_options"]["include_usage"], true);
}

// bench serve-load --acceptance: random token-id prompts, a function of the salt and the index, with a seed.
TEST(LoadWorkloads, RandomIdPromptsRepeatPerSaltAndDifferPerRequest) {
  LoadGeneratorOptions o;
  o.prompt_words = 40;
  o.prompt_id_vocab = 300;
  o.seed_requests = true;
  o.level_salt = 1;
  const json a = completion_body(o, 0), b = completion_body(o, 1);
  ASSERT_TRUE(a["prompt"].is_array());
  ASSERT_EQ(a["prompt"].size(), 40u);
  for (const auto& id : a["prompt"]) EXPECT_TRUE(id.get<int64_t>() >= 0 && id.get<int64_t>() < 300) << id;
  EXPECT_NE(a["prompt"][0], b["prompt"][0]);  // differ from the first token (no shared cache block)
  EXPECT_NE(a["seed"], b["seed"]);
  EXPECT_EQ(completion_body(o, 0), a);  // the same again: every pass of a level sends the same requests
  o.level_salt = 2;
  EXPECT_NE(completion_body(o, 0)["prompt"], a["prompt"]);
  o.seed_requests = false;
  EXPECT_FALSE(completion_body(o, 0).contains("seed"));
}

TEST(LoadWorkloads, SharedPrefixSharesTheSystemPromptOnly) {
  LoadGeneratorOptions o;
  o.system_prompt_words = 300;
  o.prompt_words = 12;
  o.level_salt = 1;
  json a = shared_prefix_body(o, 0), b = shared_prefix_body(o, 1);
  o.level_salt = 2;
  json c = shared_prefix_body(o, 0);
  ASSERT_EQ(a["messages"].size(), 2u);
  EXPECT_EQ(a["messages"][0]["role"], "system");
  EXPECT_EQ(words_in(a["messages"][0]["content"]), 300);
  EXPECT_EQ(a["messages"][0], b["messages"][0]);
  EXPECT_EQ(a["messages"][0], c["messages"][0]);  // one system prompt for every level
  EXPECT_EQ(a["messages"][1]["role"], "user");
  EXPECT_NE(a["messages"][1], b["messages"][1]);
  EXPECT_NE(a["messages"][1], c["messages"][1]);
  EXPECT_FALSE(a.contains("prompt"));
}

TEST(LoadWorkloads, ConversationResendsItsHistoryAndAnswers) {
  LoadGeneratorOptions o;
  o.prompt_words = 30;
  o.turn_words = 5;
  o.level_salt = 3;
  Conversation conv(o, 4), other(o, 5);
  json first = conv.next_request();
  ASSERT_EQ(first["messages"].size(), 1u);
  EXPECT_EQ(first["messages"][0]["role"], "user");
  const std::string first_user = first["messages"][0]["content"];
  EXPECT_GE(words_in(first_user), 30);
  EXPECT_NE(other.next_request()["messages"][0], first["messages"][0]);  // conversations differ
  conv.add_answer("answer one");
  json second = conv.next_request();
  ASSERT_EQ(second["messages"].size(), 3u);
  EXPECT_EQ(second["messages"][0]["content"], first_user);
  EXPECT_EQ(second["messages"][1], (json{{"role", "assistant"}, {"content", "answer one"}}));
  EXPECT_EQ(second["messages"][2]["role"], "user");
  EXPECT_LT(words_in(second["messages"][2]["content"]), 30);  // a follow-up: turn_words, plus its header
  EXPECT_NE(second["messages"][2]["content"], first_user);
  conv.add_answer("answer two");
  json third = conv.next_request();
  ASSERT_EQ(third["messages"].size(), 5u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(third["messages"][i], second["messages"][i]);
  EXPECT_EQ(third["messages"][3]["content"], "answer two");
  EXPECT_EQ(conv.turn(), 3);
  EXPECT_EQ(third["messages"], conv.messages());
}

TEST(LoadWorkloads, MultiTurnAgainstTheServer) {
  test::Fixture f;
  f.ready();
  LoadGeneratorOptions o = scripted_options(f);
  o.workload = Workload::MultiTurn;
  o.conversations = 3;
  o.turns = 3;
  o.turn_words = 4;
  o.level_salt = 9;
  LevelResult r = run_load_level(o, 2);
  EXPECT_EQ(r.requests, 9);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.followups, 6);
  EXPECT_EQ(r.output_tokens, 9 * 5);
  // Every turn's prompt is the previous turn's plus the answer the server returned ("Hello", the
  // scripted model's first 5 bytes) plus a new user message (the scripted template: "role:content\n").
  const std::vector<std::string> prompts = f.model->prompts();
  ASSERT_EQ(prompts.size(), 9u);
  for (int id = 0; id < 3; ++id) {
    std::vector<std::string> turns;
    for (const auto& p : prompts)
      if (p.find(fmt::format("Conversation {}-9, turn 1:", id)) != std::string::npos) turns.push_back(p);
    ASSERT_EQ(turns.size(), 3u) << id;
    std::sort(turns.begin(), turns.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
    for (size_t t = 1; t < turns.size(); ++t) {
      const std::string expected_start = turns[t - 1] + "assistant:Hello\nuser:Conversation " + std::to_string(id) +
                                         "-9, turn " + std::to_string(t + 1) + ":";
      EXPECT_EQ(turns[t].rfind(expected_start, 0), 0u) << turns[t];
    }
  }
  // The hit rate: the scripted cache counts in usage and /metrics alike; the follow-ups hit.
  EXPECT_GT(r.cached_tokens, 0);
  EXPECT_EQ(r.cache_hits, static_cast<double>(r.cached_tokens));
  EXPECT_EQ(r.cache_queries, static_cast<double>(r.prompt_tokens));
  const std::string table = format_results({r});
  EXPECT_NE(table.find("follow-up TTFT"), std::string::npos) << table;
  EXPECT_NE(table.find(fmt::format("{} of {}", r.cached_tokens, r.prompt_tokens)), std::string::npos) << table;
}

TEST(LoadWorkloads, SharedPrefixAgainstTheServer) {
  test::Fixture f;
  f.ready();
  LoadGeneratorOptions o = scripted_options(f);
  o.workload = Workload::SharedPrefix;
  o.system_prompt_words = 40;  // the scripted context is 512 bytes
  o.requests = 6;
  LevelResult r = run_load_level(o, 3);
  EXPECT_EQ(r.requests, 6);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(f.model->prompts().size(), 7u);  // one untimed warm-up request first
  // The warm-up put the system prompt in the cache: every timed request finds it (the scripted
  // template renders "system:<prompt>\n" first; whole 16-byte blocks of it are hits).
  const int64_t system_bytes = static_cast<int64_t>(shared_prefix_body(o, 0)["messages"][0]["content"].size()) + 8;
  EXPECT_GE(r.cached_tokens, 6 * (system_bytes / 16 * 16));
  EXPECT_EQ(r.cache_hits, static_cast<double>(r.cached_tokens));  // the warm-up is not counted
  EXPECT_EQ(r.cache_queries, static_cast<double>(r.prompt_tokens));
}

TEST(LoadWorkloads, RandomLevelsShareNothing) {
  test::Fixture f;
  f.ready();
  LoadGeneratorOptions o = scripted_options(f);
  o.requests = 3;
  LevelResult a = run_load_level(o, 1), b = run_load_level(o, 1);  // two levels: two salts
  EXPECT_EQ(a.errors + b.errors, 0);
  EXPECT_EQ(a.cached_tokens, 0);
  EXPECT_EQ(b.cached_tokens, 0);
  EXPECT_EQ(b.cache_hits, 0);
}

TEST(LoadWorkloads, CapacityReportsTheMostRunningAtOnce) {
  test::Fixture f;
  f.ready();
  f.model->token_delay_ms = 40;  // 8 tokens: each request runs ~0.3 s, polled every 10 ms
  LoadGeneratorOptions o = scripted_options(f);
  o.workload = Workload::Capacity;
  o.max_tokens = 8;
  o.poll_ms = 10;
  LevelResult r = run_load_level(o, 6);
  EXPECT_EQ(r.requests, 6);  // all at once
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.max_running, 6);
  EXPECT_EQ(r.max_waiting, 0);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_NE(format_results({r}).find("max running"), std::string::npos);
}
