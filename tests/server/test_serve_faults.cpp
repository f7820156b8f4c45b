// `specserve serve` on the default model under faults and load (issue 33), over loopback only:
// SIGTERM with idle, slow-header and streaming clients exits within the grace (+ the flush
// second); --request-timeout returns what was generated (200, finish_reason "abort"), streaming
// ends with the same reason; a few thousand requests at concurrency 64 all succeed and every
// T = 0 answer equals its solo run; /v1/models does not expose the checkpoint path.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "http_test_util.h"
#include "server_process.h"

using namespace specserve;
using nlohmann::json;

namespace {

struct Faults : ::testing::Test {
  static void SetUpTestSuite() { model_dir = new std::string(test::default_model_dir()); }
  static std::string* model_dir;
};
std::string* Faults::model_dir = nullptr;

httplib::Client keep_alive_client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  c.set_keep_alive(true);
  return c;
}

std::string raw_post(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// The concatenated text of a completions answer (JSON or SSE) and its last finish_reason.
struct Answer {
  std::string text;
  std::string finish;
  bool done = false;
};
Answer answer_of(const std::string& body, bool stream) {
  Answer a;
  if (!stream) {
    auto j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.contains("choices")) return a;
    a.text = j["choices"][0]["text"];
    a.finish = j["choices"][0]["finish_reason"].is_string() ? j["choices"][0]["finish_reason"].get<std::string>() : "";
    a.done = true;
    return a;
  }
  auto sse = test::parse_sse(body);
  a.done = sse.done;
  for (const auto& e : sse.events) {
    if (e["choices"].empty()) continue;
    a.text += e["choices"][0]["text"].get<std::string>();
    if (e["choices"][0]["finish_reason"].is_string()) a.finish = e["choices"][0]["finish_reason"];
  }
  return a;
}

}  // namespace

TEST_F(Faults, SigtermWithIdleSlowAndStreamingClientsExitsWithinTheGrace) {
  constexpr int kGrace = 2;
  test::ServerProcess srv(*model_dir, {"--shutdown-grace", std::to_string(kGrace)});
  std::vector<std::unique_ptr<test::RawConnection>> idle, slow, streams;
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<test::RawConnection>(srv.port(), 30));
  for (int i = 0; i < 50; ++i) {
    slow.push_back(std::make_unique<test::RawConnection>(srv.port(), 30));
    slow.back()->send_all("GET /health HTTP/1.1\r\n");
  }
  // A pooled keep-alive client, idle after its request.
  auto pooled = keep_alive_client(srv.port());
  ASSERT_EQ(pooled.Get("/health")->status, 200);
  const std::string body = json{
      {"model", srv.model()},
      {"prompt", "class A:\n"},
      {"max_tokens", 6000},
      {"stream", true},
      {"ignore_eos", true}}.dump();
  for (int i = 0; i < 2; ++i) {
    streams.push_back(std::make_unique<test::RawConnection>(srv.port(), 30));
    streams.back()->send_all(raw_post("/v1/completions", body));
    ASSERT_NE(streams.back()->read_until("\"text\"").find("200 OK"), std::string::npos);
  }
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    while (!stop) {
      for (auto& c : slow) c->send_all("X");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<std::string> rest(streams.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < streams.size(); ++i)
    readers.emplace_back([&, i] { rest[i] = streams[i]->read_until("0\r\n\r\n"); });

  double took = 0;
  const int code = srv.terminate_within(kGrace + 10, &took);
  stop = true;
  trickler.join();
  for (auto& t : readers) t.join();
  std::printf(
      "[ measured ] SIGTERM with 100 idle, 50 slow-header, 1 pooled and 2 streaming clients: exit after %.3f s "
      "(grace %d s)\n",
      took, kGrace);
  EXPECT_EQ(code, 0);
  EXPECT_LT(took, kGrace + 1.0 + 1.0) << "the bound is grace + 1 s; one more second of slack for a loaded CI machine";
  for (const auto& r : rest) {
    EXPECT_NE(r.find("\"finish_reason\":\"abort\""), std::string::npos)
        << r.substr(r.size() > 400 ? r.size() - 400 : 0);
    EXPECT_NE(r.find("data: [DONE]"), std::string::npos);
  }
}

TEST_F(Faults, RequestTimeoutReturnsWhatWasGeneratedWithFinishReasonAbort) {
  test::ServerProcess srv(*model_dir, {"--request-timeout", "1"});
  auto c = keep_alive_client(srv.port());
  json body = {{"model", srv.model()}, {"prompt", "def main():\n"}, {"max_tokens", 8000}, {"ignore_eos", true}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "abort");
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
  EXPECT_GT(j["usage"]["completion_tokens"].get<int64_t>(), 0);
  EXPECT_LT(j["usage"]["completion_tokens"].get<int64_t>(), 8000);

  body["stream"] = true;
  auto s = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  Answer a = answer_of(s->body, true);
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.finish, "abort");
  EXPECT_FALSE(a.text.empty());
  EXPECT_EQ(srv.stop(), 0);
}

TEST_F(Faults, ThousandsOfRequestsAtConcurrency64AllSucceedAndEqualTheirSoloRuns) {
  test::ServerProcess srv(*model_dir, {"--max-seqs", "64", "--max-queue", "256"});
  constexpr int kPrompts = 8, kClients = 64, kPerClient = 32;
  std::vector<json> bodies;
  for (int i = 0; i < kPrompts; ++i) {
    bodies.push_back({{"model", srv.model()},
                      {"prompt", "# task " + std::to_string(i) + "\ndef f" + std::to_string(i) + "(x):\n"},
                      {"max_tokens", 3},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  }
  std::vector<std::string> solo;
  {
    auto c = keep_alive_client(srv.port());
    for (const auto& b : bodies) {
      auto r = c.Post("/v1/completions", b.dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      solo.push_back(answer_of(r->body, false).text);
    }
  }
  std::atomic<int> errors{0}, mismatches{0}, done{0};
  std::string first_problem;
  std::mutex problem_mutex;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      auto c = keep_alive_client(srv.port());
      for (int i = 0; i < kPerClient; ++i) {
        const int p = (t + i) % kPrompts;
        json b = bodies[p];
        const bool stream = (t + i) % 4 == 0;  // a quarter as SSE streams
        if (stream) b["stream"] = true;
        auto r = c.Post("/v1/completions", b.dump(), "application/json");
        if (!r || r->status != 200) {
          errors.fetch_add(1);
          std::lock_guard lock(problem_mutex);
          if (first_problem.empty()) first_problem = r ? r->body : httplib::to_string(r.error());
          continue;
        }
        Answer a = answer_of(r->body, stream);
        if (!a.done || a.text != solo[p]) {
          mismatches.fetch_add(1);
          std::lock_guard lock(problem_mutex);
          if (first_problem.empty()) first_problem = r->body;
        }
        done.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ measured ] %d requests at concurrency %d: %.2f s (%.0f req/s), %d errors, %d mismatches\n",
              kClients * kPerClient, kClients, wall, kClients * kPerClient / wall, errors.load(), mismatches.load());
  EXPECT_EQ(errors.load(), 0) << first_problem;
  EXPECT_EQ(mismatches.load(), 0) << first_problem;
  EXPECT_EQ(done.load(), kClients * kPerClient);
  EXPECT_EQ(srv.stop(), 0);
}

TEST_F(Faults, ModelsListDoesNotExposeTheCheckpointPath) {
  test::ServerProcess srv(*model_dir, {});
  auto r = keep_alive_client(srv.port()).Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.find(*model_dir), std::string::npos) << r->body;
  auto card = json::parse(r->body)["data"][0];
  EXPECT_EQ(card["root"], card["id"]);
  EXPECT_EQ(srv.stop(), 0);
}
