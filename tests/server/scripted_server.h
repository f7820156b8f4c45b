#pragma once
// A scripted model behind the ModelServices seam and an in-process HttpServer around it, for the
// HTTP-level tests: tokens are bytes; the "model" answers "Hello, world!" one byte per event, or
// streams until cancelled when the prompt contains "forever" (or floods 64 KiB per token when it
// contains "flood"). It imitates a prefix cache's counting
// (usage.cached_tokens and the prefix_cache_* metrics) and records every prompt it was sent.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <mutex>
#include <thread>

#include "server/http_server.h"
#include "server/openai_request.h"

namespace specserve::test {

using namespace specserve::server;

// Tokens are bytes; the "model" answers with the script "Hello, world!" one byte per event, or
// streams forever (until cancelled) when the prompt contains "forever". Prefix cache, imitated: a
// prompt's cached tokens are its longest common prefix with any earlier prompt, in whole 16-token
// blocks, at most prompt length − 1 (the last prompt token is always computed).
class ScriptedModel : public ModelServices {
 public:
  ScriptedModel() {
    info_.id = "scripted";
    info_.vocab_size = 256;
    info_.context_length = 512;
  }
  ~ScriptedModel() override {
    std::lock_guard lock(mutex_);
    for (auto& t : workers_) t.join();
  }
  const ModelInfo& info() const override { return info_; }
  ChatPrompt render_chat(const ChatRequest& r) const override {
    std::string text;
    for (const auto& m : r.messages)
      text += m["role"].get<std::string>() + ":" + m["content"].get<std::string>() + "\n";
    return {text, ReasoningStart::Detect};
  }
  std::vector<int32_t> encode(const std::string& text, bool) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string decode(const std::vector<int32_t>& tokens) const override {
    return std::string(tokens.begin(), tokens.end());
  }
  std::string token_bytes(int32_t t) const override { return std::string(1, static_cast<char>(t)); }
  engine::EngineMetrics& metrics() override { return metrics_; }

  std::shared_ptr<engine::ResultStream> submit(const CommonRequest& r, std::vector<int32_t> prompt) override {
    auto stream = std::make_shared<engine::ResultStream>();
    const std::string prompt_text(prompt.begin(), prompt.end());
    const bool forever = prompt_text.find("forever") != std::string::npos;
    // "gaps": every character is preceded by an event that releases no text (as when the stop
    // checker or the reasoning splitter holds a tail back).
    const bool gaps = prompt_text.find("gaps") != std::string::npos;
    // "flood": max_tokens tokens without delay, each one's text 64 KiB (a response larger than the
    // sockets between server and client hold).
    const bool flood = prompt_text.find("flood") != std::string::npos;
    const int64_t max_tokens = r.max_tokens;
    const int64_t prompt_len = static_cast<int64_t>(prompt.size());
    const int delay_ms = forever ? 20 : flood ? 0 : token_delay_ms.load();
    metrics_.requests_running.fetch_add(1);
    std::lock_guard lock(mutex_);
    size_t common = 0;
    for (const auto& p : prompts_) {
      size_t n = 0;
      while (n < p.size() && n < prompt_text.size() && p[n] == prompt_text[n]) ++n;
      common = std::max(common, n);
    }
    const int64_t cached =
        std::min<int64_t>(static_cast<int64_t>(common), std::max<int64_t>(0, prompt_len - 1)) / 16 * 16;
    metrics_.prefix_cache_queries.fetch_add(prompt_len);
    metrics_.prefix_cache_hits.fetch_add(cached);
    prompts_.push_back(prompt_text);
    workers_.emplace_back([this, stream, forever, gaps, flood, max_tokens, prompt_len, cached, delay_ms] {
      const std::string script = "Hello, world!";
      int64_t n = 0;
      for (;; ++n) {
        if (stream->cancelled()) {
          engine::StreamEvent e;
          e.finished = true;
          e.finish_reason = engine::FinishReason::Cancelled;
          stream->push(e);
          cancelled_.fetch_add(1);
          break;
        }
        if (!forever && ((!flood && n == static_cast<int64_t>(script.size())) || n == max_tokens)) {
          engine::StreamEvent e;
          e.finished = true;
          e.finish_reason = n == max_tokens ? engine::FinishReason::Length : engine::FinishReason::Stop;
          e.usage = {prompt_len, n, cached};
          stream->push(e);
          break;
        }
        if (gaps) {
          engine::StreamEvent silent;
          silent.tokens = {0};
          stream->push(silent);
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        engine::StreamEvent e;
        char c = script[static_cast<size_t>(n) % script.size()];
        e.tokens = {c};
        e.text = std::string(flood ? 65536 : 1, c);
        stream->push(e);
        if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      }
      metrics_.requests_running.fetch_sub(1);
    });
    return stream;
  }

  // Every prompt submitted so far, in order of submission.
  std::vector<std::string> prompts() {
    std::lock_guard lock(mutex_);
    return prompts_;
  }

  std::atomic<int> cancelled_{0};
  std::atomic<int> token_delay_ms{2};  // between the tokens of a scripted answer

 private:
  ModelInfo info_;
  engine::EngineMetrics metrics_;
  std::mutex mutex_;
  std::list<std::thread> workers_;
  std::vector<std::string> prompts_;
};

struct Fixture {
  explicit Fixture(ServerOptions o = {}) {
    o.port = 0;
    o.heartbeat_ms = 100;
    state = std::make_shared<ServingState>();
    server = std::make_unique<HttpServer>(o, state);
    port = server->bind();
    server->start();
  }
  void ready() {
    model = std::make_shared<ScriptedModel>();
    state->set_ready(model);
  }
  ~Fixture() { server->stop(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20, 0);
    return c;
  }

  std::shared_ptr<ServingState> state;
  std::shared_ptr<ScriptedModel> model;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

}  // namespace specserve::test
