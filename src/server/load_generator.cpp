#include "server/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "server/http_client.h"

namespace specserve::server {

namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
  bool ok = false;
  double ttft = 0;
  double itl = 0;
  int64_t tokens = 0;
  int64_t prompt_tokens = 0;
  std::string error;
};

std::vector<std::pair<std::string, std::string>> auth_headers(const LoadOptions& o) {
  std::vector<std::pair<std::string, std::string>> h;
  if (!o.api_key.empty()) h.emplace_back("Authorization", "Bearer " + o.api_key);
  return h;
}

HttpClientResponse get(const LoadOptions& o, const std::string& path, int timeout_s) {
  HttpClientRequest req;
  req.path = path;
  req.headers = auth_headers(o);
  return http_fetch(o.host, o.port, req, timeout_s);
}

// Synthetic, request-specific text so prompts differ (no prefix reuse between requests).
std::string prompt_text(int index, int words) {
  static const char* vocab[] = {"data",   "value",  "return", "list",  "index",  "result", "model", "token",
                                "server", "stream", "batch",  "queue", "thread", "cache",  "block", "layer"};
  std::string s = fmt::format("# request {}\n", index);
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index + 1);
  for (int i = 0; i < words; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s += vocab[x % 16];
    s += (i % 12 == 11) ? "\n" : " ";
  }
  return s;
}

Sample one_request(const LoadOptions& o, int index) {
  Sample s;
  nlohmann::json prompt = prompt_text(index, o.prompt_words);
  if (!o.prompt_pattern.empty()) {
    prompt = nlohmann::json::array();
    for (int i = 0; i < o.prompt_words; ++i) prompt.push_back(o.prompt_pattern[(i + index) % o.prompt_pattern.size()]);
  }
  nlohmann::json body = {{"model", o.model},
                         {"prompt", prompt},
                         {"max_tokens", o.max_tokens},
                         {"temperature", o.temperature},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"ignore_eos", o.ignore_eos}};
  HttpClientRequest req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = auth_headers(o);
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body.dump();
  const auto start = Clock::now();
  std::optional<Clock::time_point> first, last;
  std::string buffer;
  int64_t usage_tokens = -1;
  auto on_body = [&](const char* data, size_t len) {
    const auto now = Clock::now();
    buffer.append(data, len);
    size_t pos;
    while ((pos = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, pos);
      buffer.erase(0, pos + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      auto j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) s.error = j["error"].value("message", "error event");
      if (j.contains("usage") && j["usage"].is_object()) {
        usage_tokens = j["usage"].value("completion_tokens", int64_t{0});
        s.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
      }
      if (j.contains("choices") && !j["choices"].empty() && !j["choices"][0].value("text", std::string()).empty()) {
        if (!first) first = now;
        last = now;
      }
    }
    return true;
  };
  HttpClientResponse res = http_fetch(o.host, o.port, req, o.timeout_s, on_body);
  if (!res.error.empty() && res.status == 0) {
    s.error = "transport: " + res.error;
    return s;
  }
  if (res.status != 200) {
    s.error = fmt::format("HTTP {}: {}", res.status, res.body.substr(0, 200));
    return s;
  }
  if (!first || usage_tokens <= 0 || !s.error.empty()) {
    if (s.error.empty()) s.error = "no tokens streamed";
    return s;
  }
  s.ok = true;
  s.tokens = usage_tokens;
  s.ttft = std::chrono::duration<double>(*first - start).count();
  s.itl = s.tokens > 1 ? std::chrono::duration<double>(*last - *first).count() / static_cast<double>(s.tokens - 1) : 0;
  return s;
}

// A counter from GET /metrics (the first sample line starting with `name `), or -1.
double scrape(const LoadOptions& o, const std::string& name) {
  HttpClientResponse r = get(o, "/metrics", 10);
  if (r.status != 200) return -1;
  size_t pos = 0;
  const std::string& body = r.body;
  while ((pos = body.find(name + " ", pos)) != std::string::npos) {
    if (pos == 0 || body[pos - 1] == '\n') return std::atof(body.c_str() + pos + name.size() + 1);
    pos += name.size();
  }
  return -1;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

std::string discover_model(const LoadOptions& o) {
  if (!o.model.empty()) return o.model;
  HttpClientResponse r = get(o, "/v1/models", 30);
  SS_CHECK(r.status == 200, "cannot list models at {}:{} ({})", o.host, o.port,
           r.status ? fmt::format("HTTP {}", r.status) : r.error);
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  SS_CHECK(!j.is_discarded() && j.contains("data") && !j["data"].empty(), "GET /v1/models returned no model");
  return j["data"][0].value("id", std::string());
}

LevelResult run_load_level(const LoadOptions& o, int concurrency) {
  LevelResult r;
  r.concurrency = concurrency;
  r.requests = o.requests > 0 ? o.requests : std::max(16, 4 * concurrency);
  std::vector<Sample> samples(static_cast<size_t>(r.requests));
  const char* kDrafts = "specserve:spec_decode_num_drafts_total";
  const char* kDraftTokens = "specserve:spec_decode_num_draft_tokens_total";
  const char* kAccepted = "specserve:spec_decode_num_accepted_tokens_total";
  const double drafts0 = scrape(o, kDrafts), draft_tokens0 = scrape(o, kDraftTokens), accepted0 = scrape(o, kAccepted);
  std::atomic<int> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < r.requests;) samples[static_cast<size_t>(i)] = one_request(o, i);
    });
  }
  for (auto& t : workers) t.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (drafts0 >= 0) {
    r.spec_drafts = scrape(o, kDrafts) - drafts0;
    r.spec_draft_tokens = scrape(o, kDraftTokens) - draft_tokens0;
    r.spec_accepted = scrape(o, kAccepted) - accepted0;
  }
  std::vector<double> ttft, itl;
  for (const auto& s : samples) {
    if (!s.ok) {
      ++r.errors;
      if (r.first_error.empty()) r.first_error = s.error;
      continue;
    }
    ttft.push_back(s.ttft);
    if (s.tokens > 1) itl.push_back(s.itl);
    r.output_tokens += s.tokens;
    r.prompt_tokens += s.prompt_tokens;
  }
  r.ttft_mean = mean(ttft);
  r.ttft_p50 = percentile(ttft, 0.5);
  r.ttft_p99 = percentile(ttft, 0.99);
  r.itl_mean = mean(itl);
  r.itl_p50 = percentile(itl, 0.5);
  r.itl_p99 = percentile(itl, 0.99);
  r.tokens_per_s = r.wall_s > 0 ? static_cast<double>(r.output_tokens) / r.wall_s : 0;
  return r;
}

std::string format_results(const std::vector<LevelResult>& results) {
  // Speculative servers get the acceptance columns: tokens per verify round (accepted + 1) and the
  // fraction of draft tokens accepted.
  bool spec = false;
  for (const auto& r : results) spec |= r.spec_drafts > 0;
  std::string out =
      "| concurrency | requests | errors | TTFT mean / p50 / p99 (ms) | ITL mean / p50 / p99 (ms) | output tok/s | wall (s) |";
  out += spec ? " tokens/verify | draft acceptance |\n|---:|---:|---:|---|---|---:|---:|---:|---:|\n"
              : "\n|---:|---:|---:|---|---|---:|---:|\n";
  for (const auto& r : results) {
    out += fmt::format("| {} | {} | {} | {:.1f} / {:.1f} / {:.1f} | {:.2f} / {:.2f} / {:.2f} | {:.1f} | {:.1f} |",
                       r.concurrency, r.requests, r.errors, r.ttft_mean * 1e3, r.ttft_p50 * 1e3, r.ttft_p99 * 1e3,
                       r.itl_mean * 1e3, r.itl_p50 * 1e3, r.itl_p99 * 1e3, r.tokens_per_s, r.wall_s);
    if (spec) {
      if (r.spec_drafts > 0) {
        out += fmt::format(" {:.2f} | {:.1f}% |", 1.0 + r.spec_accepted / r.spec_drafts,
                           100.0 * r.spec_accepted / std::max(1.0, r.spec_draft_tokens));
      } else {
        out += " – | – |";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace specserve::server
