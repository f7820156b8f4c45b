// The load generator (`specserve bench serve-load`) and its small HTTP client against the
// in-process server with the scripted model: every request streams and is counted, tokens and
// latencies are measured, errors are reported (a wrong API key), the model id is discovered.
#include <gtest/gtest.h>

#include "scripted_server.h"
#include "server/http_client.h"
#include "server/load_generator.h"

using namespace specserve;
using namespace specserve::server;

TEST(LoadGenerator, StreamsEveryRequestAndMeasuresIt) {
  test::Fixture f;
  f.ready();
  LoadOptions o;
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
  LoadOptions o;
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
