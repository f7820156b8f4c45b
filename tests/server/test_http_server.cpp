// The HTTP layer end to end over real sockets, with a scripted model behind the ModelServices
// seam (the model-backed server is tested in test_serve_e2e.cpp): loading → ready, auth, error
// bodies for every 4xx, the malformed corpus, SSE framing, disconnect → cancellation, and many
// concurrent streams.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "http_test_util.h"
#include "malformed_corpus.h"
#include "scripted_server.h"

using namespace specserve;
using namespace specserve::server;
using nlohmann::json;

namespace {

using test::Fixture;
using test::ScriptedModel;

const char* kChat = R"({"model":"scripted","messages":[{"role":"user","content":"hi"}]})";

void expect_openai_error(const httplib::Result& r, int status) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_FALSE(test::error_of(r->body).is_null()) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
}

}  // namespace

TEST(HttpServer, HealthIs503WhileLoadingThen200) {
  Fixture f;
  auto c = f.client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["status"], "loading");
  expect_openai_error(c.Post("/v1/chat/completions", kChat, "application/json"), 503);
  expect_openai_error(c.Get("/v1/models"), 503);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("specserve:model_ready 0"), std::string::npos);

  f.ready();
  r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["id"], "scripted");
  EXPECT_EQ(c.Get("/v1/models/scripted")->status, 200);
  expect_openai_error(c.Get("/v1/models/other"), 404);
}

TEST(HttpServer, ChatNonStream) {
  Fixture f;
  f.ready();
  auto r = f.client().Post("/v1/chat/completions", kChat, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello, world!");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 13);
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
}

TEST(HttpServer, ChatStreamFraming) {
  Fixture f;
  f.ready();
  std::string body = R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5,
                         "stream_options":{"include_usage":true}})";
  auto r = f.client().Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  test::SseParse sse = test::parse_sse(r->body);
  EXPECT_TRUE(sse.valid);
  EXPECT_TRUE(sse.done);
  std::string text;
  for (const auto& e : sse.events) {
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content")) {
      text += e["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(sse.events.back()["usage"]["completion_tokens"], 5);
  EXPECT_EQ(sse.events[sse.events.size() - 2]["choices"][0]["finish_reason"], "length");
  // The body ends with the terminator.
  EXPECT_EQ(r->body.substr(r->body.size() - 14), "data: [DONE]\n\n");
}

TEST(HttpServer, StreamSurvivesEventsWithoutText) {
  // Regression: an event that produced no chunk used to be written as zero bytes, which httplib
  // takes as the end of the body (the response closed without its last chunk: "Premature close").
  Fixture f;
  f.ready();
  auto r = f.client().Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"gaps"}],"stream":true})",
                           "application/json");
  ASSERT_TRUE(r);
  test::SseParse sse = test::parse_sse(r->body);
  EXPECT_TRUE(sse.done) << r->body;
  std::string text;
  for (const auto& e : sse.events) {
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content")) {
      text += e["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "Hello, world!");
}

TEST(HttpServer, CompletionsStreamAndEcho) {
  Fixture f;
  f.ready();
  auto r = f.client().Post("/v1/completions", R"({"prompt":"Q:","echo":true,"max_tokens":3})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], "Q:Hel");
  r = f.client().Post("/v1/completions", R"({"prompt":[81,58],"stream":true})", "application/json");
  ASSERT_TRUE(r);
  test::SseParse sse = test::parse_sse(r->body);
  EXPECT_TRUE(sse.done);
  std::string text;
  for (const auto& e : sse.events) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello, world!");
}

TEST(HttpServer, TokenizeDetokenize) {
  Fixture f;
  f.ready();
  auto c = f.client();
  auto r = c.Post("/tokenize", R"({"prompt":"AB"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["tokens"], (json{65, 66}));
  EXPECT_EQ(json::parse(r->body)["count"], 2);
  r = c.Post("/detokenize", R"({"tokens":[65,66]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["prompt"], "AB");
}

TEST(HttpServer, ApiKey) {
  ServerOptions o;
  o.api_key = "sekrit";
  Fixture f(o);
  f.ready();
  auto c = f.client();
  expect_openai_error(c.Post("/v1/chat/completions", kChat, "application/json"), 401);
  expect_openai_error(c.Get("/v1/models"), 401);
  expect_openai_error(c.Post("/tokenize", R"({"prompt":"a"})", "application/json"), 401);
  httplib::Headers wrong = {{"Authorization", "Bearer sekriT"}};
  expect_openai_error(c.Get("/v1/models", wrong), 401);
  httplib::Headers right = {{"Authorization", "Bearer sekrit"}};
  EXPECT_EQ(c.Get("/v1/models", right)->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // health stays open for load balancers
  EXPECT_EQ(json::parse(c.Post("/v1/chat/completions", right, kChat, "application/json")->body)["object"],
            "chat.completion");
}

TEST(HttpServer, TransportErrorsAreOpenAIShaped) {
  ServerOptions o;
  o.max_body_bytes = 1024;
  o.read_timeout_s = 2;  // a client that stops sending is answered after the read timeout
  Fixture f(o);
  f.ready();
  auto c = f.client();
  expect_openai_error(c.Get("/nope"), 404);
  expect_openai_error(c.Post("/v1/nope", "{}", "application/json"), 404);
  // A known path with the wrong method: 405 naming the allowed ones.
  auto wrong_method = c.Get("/v1/chat/completions");
  expect_openai_error(wrong_method, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");
  expect_openai_error(c.Post("/v1/chat/completions", std::string(4096, ' '), "application/json"), 413);

  // A body shorter than its Content-Length from a client that then stalls: 408 once the body's
  // deadline passes, and the connection is closed.
  {
    test::RawConnection conn(f.port);
    ASSERT_TRUE(conn.ok());
    conn.send_all(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 200\r\n\r\n{\"messages\":");
    std::string resp = conn.read_all();
    EXPECT_EQ(test::raw_status(resp), 408) << resp;
    EXPECT_NE(resp.find("Connection: close"), std::string::npos) << resp;
  }
  // The same from a client that half-closes: the connection is dropped without an answer
  // (nothing can be parsed), and nothing else is affected.
  {
    test::RawConnection conn(f.port);
    conn.send_all("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{\"mess");
    conn.shutdown_write();
    EXPECT_EQ(conn.read_all(), "");
  }
  // A garbage request line.
  test::RawConnection junk(f.port);
  junk.send_all("THIS IS NOT HTTP\r\n\r\n");
  std::string jr = junk.read_all();
  EXPECT_EQ(test::raw_status(jr), 400) << jr;
  // The server still serves.
  EXPECT_EQ(c.Post("/v1/chat/completions", kChat, "application/json")->status, 200);
}

TEST(HttpServer, MalformedCorpusGets4xxAndServerKeepsServing) {
  Fixture f;
  f.ready();
  auto c = f.client();
  auto corpus = test::malformed_requests("scripted", 256, 512);
  ASSERT_GE(corpus.size(), 200u);
  size_t i = 0;
  for (const auto& bad : corpus) {
    auto r = c.Post(bad.path, bad.body, "application/json");
    ASSERT_TRUE(r) << bad.what;
    EXPECT_GE(r->status, 400) << bad.what << ": " << r->body;
    EXPECT_LT(r->status, 500) << bad.what << ": " << r->body;
    EXPECT_FALSE(test::error_of(r->body).is_null()) << bad.what << ": " << r->body;
    if (++i % 25 == 0) {
      auto ok = c.Post("/v1/chat/completions", kChat, "application/json");
      ASSERT_TRUE(ok);
      EXPECT_EQ(json::parse(ok->body)["choices"][0]["message"]["content"], "Hello, world!");
    }
  }
}

TEST(HttpServer, DisconnectCancelsTheRequest) {
  Fixture f;
  f.ready();
  test::RawConnection conn(f.port);
  std::string body = R"({"messages":[{"role":"user","content":"forever"}],"stream":true})";
  conn.send_all("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
  std::string got = conn.read_until("\"content\":\"l\"");
  ASSERT_NE(got.find("200 OK"), std::string::npos) << got;
  EXPECT_EQ(f.model->cancelled_.load(), 0);
  conn.close();
  EXPECT_TRUE(test::wait_for([&] { return f.model->cancelled_.load() == 1; }, std::chrono::seconds(10)));
  EXPECT_TRUE(test::wait_for([&] { return f.model->metrics().requests_running.load() == 0; }, std::chrono::seconds(5)));
  auto m = f.client().Get("/metrics");
  EXPECT_NE(m->body.find("specserve:http_client_disconnects_total 1"), std::string::npos) << m->body;
}

TEST(HttpServer, ManyConcurrentStreams) {
  ServerOptions o;
  o.max_seqs = 8;
  o.max_queue = 40;
  Fixture f(o);
  f.ready();
  constexpr int kClients = 48;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      auto c = f.client();
      auto r = c.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stream":true})",
                      "application/json");
      if (!r || r->status != 200) {
        ADD_FAILURE() << (r ? r->body : httplib::to_string(r.error()));
        return;
      }
      auto sse = test::parse_sse(r->body);
      std::string text;
      for (const auto& e : sse.events) {
        if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content")) {
          text += e["choices"][0]["delta"]["content"].get<std::string>();
        }
      }
      if (sse.done && text == "Hello, world!")
        ok.fetch_add(1);
      else
        ADD_FAILURE() << r->body;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients);
}

// usage.prompt_tokens_details.cached_tokens and the prefix_cache_* counters reach the client from
// the engine's values (here the scripted model's imitation of a prefix cache: whole 16-byte blocks of
// the longest prefix shared with an earlier prompt), on chat and completions, streaming or not.
TEST(HttpServer, PrefixCacheUsageAndMetrics) {
  Fixture f;
  f.ready();
  const std::string shared(40, 'S');  // 40 shared bytes: two whole 16-byte blocks
  auto completion = [&](const std::string& tail, bool stream) {
    json body = {{"prompt", shared + tail}, {"max_tokens", 2}, {"stream", stream}};
    if (stream) body["stream_options"] = {{"include_usage", true}};
    auto r = f.client().Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200);
    if (!stream) return json::parse(r->body)["usage"];
    test::SseParse sse = test::parse_sse(r->body);
    EXPECT_TRUE(sse.done);
    return sse.events.back()["usage"];
  };
  json u = completion("first", false);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 0) << u;
  u = completion("second", false);
  EXPECT_EQ(u["prompt_tokens"], 46);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 32) << u;
  u = completion("third", true);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 32) << u;

  // Chat: the scripted template renders "role:content\n" per message.
  const std::string chat = R"({"messages":[{"role":"user","content":"SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS"}]})";
  auto r = f.client().Post("/v1/chat/completions", chat, "application/json");
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  json streamed = json::parse(chat);
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  r = f.client().Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 200);
  test::SseParse sse = test::parse_sse(r->body);
  ASSERT_TRUE(sse.done);
  // "user:" + 42 bytes + "\n" = 48 bytes, all seen before: 47 at most, in whole blocks: 32.
  EXPECT_EQ(sse.events.back()["usage"]["prompt_tokens_details"]["cached_tokens"], 32) << sse.events.back();

  // The counters: every prompt token queried, the cached ones hit.
  const std::string page = f.client().Get("/metrics")->body;
  const int64_t queries = 45 + 46 + 45 + 48 + 48, hits = 32 + 32 + 32;
  EXPECT_NE(page.find("specserve:prefix_cache_queries_total " + std::to_string(queries) + "\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find("specserve:prefix_cache_hits_total " + std::to_string(hits) + "\n"), std::string::npos) << page;
}
