// `specserve serve` on the default model, end to end over HTTP: the malformed corpus gets 4xx
// while correct answers keep coming; 16 concurrent streams produce exactly what each request
// produces alone; a client that disconnects mid-stream frees its sequence (metrics show it)
// while another stream continues; SIGTERM exits cleanly. With a DFlash drafter (the trained
// hybrid fixture pair), 16 concurrent streams produce exactly the tokens plain decoding produces.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include "http_test_util.h"
#include "malformed_corpus.h"
#include "server_process.h"

using namespace specserve;
using nlohmann::json;

namespace {

struct E2E : ::testing::Test {
  static void SetUpTestSuite() { model_dir = new std::string(test::default_model_dir()); }
  static std::string* model_dir;
};
std::string* E2E::model_dir = nullptr;

httplib::Client client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  return c;
}

// A metric's value from the /metrics text (the first sample whose line starts with `prefix`).
double metric(int port, const std::string& prefix) {
  auto r = client(port).Get("/metrics");
  if (!r) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  }
  return -1;
}

struct Streamed {
  std::string text;
  std::vector<std::string> tokens;  // logprobs tokens, in order
  int64_t completion_tokens = -1;
  bool done = false;
};

Streamed stream_completion(int port, const json& body) {
  auto r = client(port).Post("/v1/completions", body.dump(), "application/json");
  Streamed s;
  if (!r || r->status != 200) {
    ADD_FAILURE() << (r ? r->body : httplib::to_string(r.error()));
    return s;
  }
  auto sse = test::parse_sse(r->body);
  s.done = sse.done;
  for (const auto& e : sse.events) {
    if (e.contains("usage") && e["usage"].is_object()) s.completion_tokens = e["usage"]["completion_tokens"];
    if (e["choices"].empty()) continue;
    s.text += e["choices"][0]["text"].get<std::string>();
    const auto& lp = e["choices"][0]["logprobs"];
    if (lp.is_object()) {
      for (const auto& t : lp["tokens"]) s.tokens.push_back(t.get<std::string>());
    }
  }
  return s;
}

}  // namespace

TEST_F(E2E, MalformedRequestsGet4xxWhileServingCorrectAnswers) {
  test::ServerProcess srv(*model_dir, {});
  auto c = client(srv.port());
  auto info = json::parse(c.Get("/v1/models")->body)["data"][0];
  const int64_t context = info["max_model_len"];
  auto tok = c.Post("/tokenize", R"({"prompt":"x"})", "application/json");
  ASSERT_EQ(tok->status, 200);
  // The vocabulary bound: the first id /detokenize refuses.
  int64_t vocab = 1;
  while (c.Post("/detokenize", json{{"tokens", {vocab * 2}}}.dump(), "application/json")->status == 200) vocab *= 2;
  int64_t lo = vocab, hi = vocab * 2;  // lo accepted, hi refused
  while (hi - lo > 1) {
    int64_t mid = (lo + hi) / 2;
    (c.Post("/detokenize", json{{"tokens", {mid}}}.dump(), "application/json")->status == 200 ? lo : hi) = mid;
  }
  const json valid = {{"model", srv.model()},
                      {"messages", {{{"role", "user"}, {"content", "def add(a, b):"}}}},
                      {"max_tokens", 12},
                      {"temperature", 0}};
  auto first = c.Post("/v1/chat/completions", valid.dump(), "application/json");
  ASSERT_EQ(first->status, 200) << first->body;
  const std::string expected = json::parse(first->body)["choices"][0]["message"]["content"];

  auto corpus = test::malformed_requests(srv.model(), hi, context);
  ASSERT_GE(corpus.size(), 200u);
  size_t i = 0;
  for (const auto& bad : corpus) {
    auto r = c.Post(bad.path, bad.body, "application/json");
    ASSERT_TRUE(r) << bad.what;
    EXPECT_GE(r->status, 400) << bad.what << ": " << r->body;
    EXPECT_LT(r->status, 500) << bad.what << ": " << r->body;
    EXPECT_FALSE(test::error_of(r->body).is_null()) << bad.what << ": " << r->body;
    if (++i % 20 == 0) {
      auto ok = c.Post("/v1/chat/completions", valid.dump(), "application/json");
      ASSERT_TRUE(ok);
      ASSERT_EQ(ok->status, 200) << ok->body;
      EXPECT_EQ(json::parse(ok->body)["choices"][0]["message"]["content"], expected);
    }
  }
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_GE(metric(srv.port(), "specserve:http_responses_total{code=\"400\"}"), 150);
  EXPECT_EQ(srv.stop(), 0);
}

TEST_F(E2E, SixteenConcurrentStreamsEqualTheSameRequestsAlone) {
  test::ServerProcess srv(*model_dir, {"--max-seqs", "16", "--prefill-chunk", "64"});
  std::vector<json> bodies;
  for (int i = 0; i < 16; ++i) {
    std::string prompt = "# file " + std::to_string(i) + "\n";
    for (int k = 0; k < 1 + (i * 13) % 60; ++k)
      prompt += "value_" + std::to_string((i * 31 + k) % 97) + " = " + std::to_string(k) + "\n";
    json b = {{"model", srv.model()},
              {"prompt", prompt},
              {"max_tokens", 8 + (i * 11) % 40},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}},
              {"logprobs", 0},
              {"ignore_eos", true}};
    if (i % 2) {
      b["temperature"] = 0.8;
      b["top_p"] = 0.95;
      b["seed"] = 100 + i;
    } else {
      b["temperature"] = 0;
    }
    bodies.push_back(b);
  }
  std::vector<Streamed> alone;
  for (const auto& b : bodies) alone.push_back(stream_completion(srv.port(), b));
  std::vector<Streamed> together(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = stream_completion(srv.port(), bodies[i]); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_TRUE(together[i].done) << i;
    EXPECT_EQ(together[i].completion_tokens, bodies[i]["max_tokens"].get<int64_t>()) << i;
    EXPECT_EQ(together[i].tokens.size(), static_cast<size_t>(together[i].completion_tokens)) << i;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
  }
  EXPECT_EQ(srv.stop(), 0);
}

TEST_F(E2E, DisconnectMidStreamFreesTheSequenceWhileOthersContinue) {
  test::ServerProcess srv(*model_dir, {"--max-seqs", "4"});
  const json other = {
      {"model", srv.model()}, {"prompt", "def main():\n"}, {"max_tokens", 48}, {"temperature", 0}, {"stream", true},
      {"logprobs", 0},        {"ignore_eos", true}};
  const Streamed other_alone = stream_completion(srv.port(), other);

  test::RawConnection conn(srv.port());
  const std::string body = json{
      {"model", srv.model()},
      {"prompt", "import sys\n"},
      {"max_tokens", 4000},
      {"stream", true},
      {"ignore_eos", true}}.dump();
  conn.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
  // Several chunks arrive: the long request is running.
  std::string got;
  for (int chunks = 0; chunks < 4;) {
    std::string part = conn.read_until("\n\n");
    ASSERT_FALSE(part.empty());
    got += part;
    chunks = static_cast<int>(std::count(got.begin(), got.end(), '\n')) / 2;
  }
  EXPECT_EQ(metric(srv.port(), "specserve:num_requests_running"), 1);

  Streamed other_together;
  std::thread t([&] { other_together = stream_completion(srv.port(), other); });
  conn.close();  // the client goes away mid-stream
  EXPECT_TRUE(test::wait_for(
      [&] { return metric(srv.port(), "specserve:requests_finished_total{finished_reason=\"cancelled\"}") == 1; },
      std::chrono::seconds(30)));
  t.join();
  EXPECT_EQ(other_together.tokens, other_alone.tokens);
  EXPECT_TRUE(test::wait_for([&] { return metric(srv.port(), "specserve:num_requests_running") == 0; },
                             std::chrono::seconds(10)));
  EXPECT_EQ(metric(srv.port(), "specserve:kv_blocks_used"), 0);
  EXPECT_EQ(metric(srv.port(), "specserve:http_client_disconnects_total"), 1);
  EXPECT_EQ(srv.stop(), 0);
}

TEST_F(E2E, SigtermDrainsRunningStreamsAndExitsCleanly) {
  test::ServerProcess srv(*model_dir, {"--shutdown-grace", "1"});
  test::RawConnection conn(srv.port());
  const std::string body = json{
      {"model", srv.model()},
      {"prompt", "class A:\n"},
      {"max_tokens", 6000},
      {"stream", true},
      {"ignore_eos", true}}.dump();
  conn.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_NE(conn.read_until("\"text\"").find("200 OK"), std::string::npos);
  std::string rest;
  std::thread reader([&] { rest = conn.read_until("data: [DONE]"); });
  // SIGTERM: the running stream gets the grace second, then is cancelled and closed properly.
  EXPECT_EQ(srv.stop(), 0);
  reader.join();
  EXPECT_NE(rest.find("\"finish_reason\":\"abort\""), std::string::npos)
      << rest.substr(rest.size() > 400 ? rest.size() - 400 : 0);
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos);
}

namespace {
// The trained hybrid DFlash fixture pair (tests/fixtures/dflash) served over HTTP: its target
// checkpoint plus a tokenizer (the tiny model's byte-level BPE covers the target's 384 ids).
std::string fixture_model_dir() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("specserve-e2e-hybrid-" + std::to_string(getpid()));
  const fs::path tok = dir / "tok";
  fs::create_directories(dir);
  const fs::path target = fs::path(SPECSERVE_SOURCE_DIR) / "tests/fixtures/dflash/hybrid-trained/target";
  for (const auto& e : fs::directory_iterator(target)) {
    fs::create_symlink(e.path(), dir / e.path().filename());
  }
  std::string cmd = std::string(SPECSERVE_BINARY_DIR) + "/bin/make_tiny_model --out " + tok.string() + " > /dev/null";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make_tiny_model failed");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok / f, dir / f);
  return dir.string();
}
}  // namespace

TEST_F(E2E, SpeculativeStreamsEqualPlainDecoding) {
  const std::string model = fixture_model_dir();
  const std::string draft = std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/dflash/hybrid-trained/draft";
  test::ServerProcess plain(model, {"--max-seqs", "16", "--prefill-chunk", "64"});
  test::ServerProcess spec(model,
                           {"--max-seqs", "16", "--prefill-chunk", "64", "--draft", draft, "--draft-policy", "fixed"});
  // The default adaptive draft policy, its step costs timed at start-up (the profile named cannot be read:
  // refused with a warning, then calibrated).
  test::ServerProcess adaptive(model, {"--max-seqs", "16", "--prefill-chunk", "64", "--draft", draft,
                                       "--step-cost-profile", "/nonexistent/step-costs.json"});
  // Prompts in the fixture's synthetic language (high acceptance), mixed lengths; greedy and seeded.
  const std::vector<int> pattern = {130, 66, 172, 183, 18};
  std::vector<json> bodies;
  for (int i = 0; i < 16; ++i) {
    json prompt = json::array();
    for (int k = 0; k < 2 + (i * 7) % 30; ++k) prompt.push_back(pattern[(k + i) % pattern.size()]);
    json b = {{"prompt", prompt}, {"max_tokens", 16 + (i * 9) % 48},
              {"stream", true},   {"stream_options", {{"include_usage", true}}},
              {"logprobs", 0},    {"ignore_eos", true}};
    if (i % 2) {
      b["temperature"] = 0.7;
      b["seed"] = 7 * i;
    } else {
      b["temperature"] = 0;
    }
    bodies.push_back(b);
  }
  std::vector<Streamed> alone;
  for (auto b : bodies) {
    b["model"] = plain.model();
    alone.push_back(stream_completion(plain.port(), b));
  }
  std::vector<Streamed> together(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) {
    threads.emplace_back([&, i] {
      json b = bodies[i];
      b["model"] = spec.model();
      together[i] = stream_completion(spec.port(), b);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Streamed> adaptive_runs(bodies.size());
  threads.clear();
  for (size_t i = 0; i < bodies.size(); ++i) {
    threads.emplace_back([&, i] {
      json b = bodies[i];
      b["model"] = adaptive.model();
      adaptive_runs[i] = stream_completion(adaptive.port(), b);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(adaptive_runs[i].tokens, alone[i].tokens) << "adaptive " << i;
  EXPECT_GT(metric(adaptive.port(), R"(specserve:step_cost_predicted_seconds{kind="decode",sequences="1",)"
                                    R"(rows_per_sequence="1",context="1024"})"),
            0);
  EXPECT_EQ(adaptive.stop(), 0);
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(together[i].completion_tokens, bodies[i]["max_tokens"].get<int64_t>()) << i;
    EXPECT_EQ(together[i].tokens.size(), static_cast<size_t>(together[i].completion_tokens)) << i;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
  }
  const double drafts = metric(spec.port(), "specserve:spec_decode_num_drafts_total");
  const double accepted = metric(spec.port(), "specserve:spec_decode_num_accepted_tokens_total");
  EXPECT_GT(drafts, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_EQ(metric(plain.port(), "specserve:spec_decode_num_drafts_total"), 0);
  auto card = json::parse(client(spec.port()).Get("/v1/models")->body)["data"][0];
  EXPECT_EQ(card["speculative_decoding"]["method"], "dflash");
  EXPECT_EQ(plain.stop(), 0);
  EXPECT_EQ(spec.stop(), 0);
  std::filesystem::remove_all(model);
}
