#include "core/splitmix64.h"
#include "server/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "server/http_client.h"

namespace specserve::server {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
  bool ok = false;
  double ttft = 0;
  double itl = 0;
  int64_t tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens; -1 when absent
  int turn = 0;                // multi-turn: 1 for a conversation's first request
  std::string answer;          // chat: the streamed content (else the reasoning), for the next turn
  std::string error;
};

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

std::vector<std::pair<std::string, std::string>> auth_headers(const LoadGeneratorOptions& o) {
  std::vector<std::pair<std::string, std::string>> h;
  if (!o.api_key.empty()) h.emplace_back("Authorization", "Bearer " + o.api_key);
  return h;
}

HttpClientResponse get(const LoadGeneratorOptions& o, const std::string& path, int timeout_s) {
  HttpClientRequest req;
  req.path = path;
  req.headers = auth_headers(o);
  return http_fetch(o.host, o.port, req, timeout_s);
}

json common_fields(const LoadGeneratorOptions& o) {
  return {{"model", o.model},
          {"max_tokens", o.max_tokens},
          {"temperature", o.temperature},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}},
          {"ignore_eos", o.ignore_eos}};
}

// Sends one streaming request and times its chunks: text_completion chunks (choices[0].text) and
// chat chunks (choices[0].delta.content / reasoning_content) alike.
Sample send_streaming(const LoadGeneratorOptions& o, const std::string& path, const json& body) {
  Sample s;
  HttpClientRequest req;
  req.method = "POST";
  req.path = path;
  req.headers = auth_headers(o);
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body.dump();
  const auto start = Clock::now();
  std::optional<Clock::time_point> first, last;
  std::string buffer, content, reasoning;
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
      auto j = json::parse(payload, nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;
      if (j.contains("error")) {
        const json& e = j["error"];
        s.error = e.is_object() ? e.value("message", std::string("error event")) : std::string("error event");
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        const json& u = j["usage"];
        usage_tokens = u.value("completion_tokens", int64_t{0});
        s.prompt_tokens = u.value("prompt_tokens", int64_t{0});
        if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
          const json& d = u["prompt_tokens_details"];
          if (d.contains("cached_tokens") && d["cached_tokens"].is_number_integer())
            s.cached_tokens = d["cached_tokens"].get<int64_t>();
        }
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      if (!c.is_object()) continue;
      bool text = false;
      if (c.contains("text") && c["text"].is_string() && !c["text"].get_ref<const std::string&>().empty()) text = true;
      if (c.contains("delta") && c["delta"].is_object()) {
        const json& d = c["delta"];
        if (d.contains("content") && d["content"].is_string() && !d["content"].get_ref<const std::string&>().empty()) {
          content += d["content"].get<std::string>();
          text = true;
        }
        if (d.contains("reasoning_content") && d["reasoning_content"].is_string() &&
            !d["reasoning_content"].get_ref<const std::string&>().empty()) {
          reasoning += d["reasoning_content"].get<std::string>();
          text = true;
        }
      }
      if (text) {
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
  s.answer = content.empty() ? reasoning : content;
  s.ttft = std::chrono::duration<double>(*first - start).count();
  s.itl = s.tokens > 1 ? std::chrono::duration<double>(*last - *first).count() / static_cast<double>(s.tokens - 1) : 0;
  return s;
}

// GET /metrics as name → value, the samples of a name summed over their labels; empty when the
// server has no /metrics.
using MetricsPage = std::map<std::string, double>;

MetricsPage scrape(const LoadGeneratorOptions& o) {
  MetricsPage m;
  HttpClientResponse r = get(o, "/metrics", 10);
  if (r.status != 200) return m;
  size_t pos = 0;
  const std::string& body = r.body;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    size_t value_at = line[name_end] == '{' ? line.find("} ", name_end) : name_end;
    if (value_at == std::string::npos) continue;
    value_at = line.find(' ', value_at) + 1;
    m[line.substr(0, name_end)] += std::atof(line.c_str() + value_at);
  }
  return m;
}

// specserve's metric, else vLLM's of the same name; -1 when neither is there.
double metric(const MetricsPage& m, const std::string& name) {
  for (const char* prefix : {"specserve:", "vllm:"}) {
    auto it = m.find(prefix + name);
    if (it != m.end()) return it->second;
  }
  return -1;
}

double delta(const MetricsPage& before, const MetricsPage& after, const std::string& name) {
  const double a = metric(before, name), b = metric(after, name);
  return a >= 0 && b >= 0 ? b - a : -1;
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

// The system prompt of shared-prefix: one text for every level and run.
constexpr uint64_t kSharedPromptSeed = 0x5EED5EED5EEDull;

// Runs `count` jobs on `concurrency` threads (job i gets index i).
template <class Job>
void run_workers(int concurrency, int count, const Job& job) {
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < count;) job(i);
    });
  }
  for (auto& t : workers) t.join();
}

}  // namespace

Workload parse_workload(const std::string& name) {
  if (name == "random") return Workload::Random;
  if (name == "shared-prefix") return Workload::SharedPrefix;
  if (name == "multi-turn") return Workload::MultiTurn;
  if (name == "capacity") return Workload::Capacity;
  fail("--workload must be random, shared-prefix, multi-turn or capacity, got '{}'", name);
}

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::Random: return "random";
    case Workload::SharedPrefix: return "shared-prefix";
    case Workload::MultiTurn: return "multi-turn";
    case Workload::Capacity: return "capacity";
  }
  return "?";
}

std::string synthetic_text(uint64_t seed, int words) {
  static const char* vocab[] = {"data",   "value",  "return", "list",  "index",  "result", "model", "token",
                                "server", "stream", "batch",  "queue", "thread", "cache",  "block", "layer"};
  std::string s;
  uint64_t x = splitmix64(seed) | 1;
  for (int i = 0; i < words; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s += vocab[(x >> 20) % 16];
    s += (i % 12 == 11) ? "\n" : " ";
  }
  return s;
}

json completion_body(const LoadGeneratorOptions& o, int index) {
  json body = common_fields(o);
  const uint64_t request_key = mix(o.level_salt, static_cast<uint64_t>(index));
  if (o.seed_requests) body["seed"] = request_key >> 1;  // fits a signed 64-bit integer
  if (o.prompt_pattern.empty() && o.prompt_id_vocab > 0) {
    json prompt = json::array();
    std::mt19937_64 rng(request_key);
    std::uniform_int_distribution<int64_t> id(0, o.prompt_id_vocab - 1);
    for (int i = 0; i < o.prompt_words; ++i) prompt.push_back(id(rng));
    body["prompt"] = std::move(prompt);
  } else if (!o.prompt_pattern.empty()) {
    // Rotated by the index, and by the level's salt, so levels differ too.
    json prompt = json::array();
    const uint64_t shift = static_cast<uint64_t>(index) + o.level_salt;
    for (int i = 0; i < o.prompt_words; ++i)
      prompt.push_back(o.prompt_pattern[(static_cast<uint64_t>(i) + shift) % o.prompt_pattern.size()]);
    body["prompt"] = std::move(prompt);
  } else {
    // The index first, then the level's salt: no 16-token block is shared between requests or levels.
    body["prompt"] = fmt::format("# request {}-{:x}\n", index, o.level_salt) +
                     synthetic_text(mix(o.level_salt, static_cast<uint64_t>(index)), o.prompt_words);
  }
  return body;
}

json shared_prefix_body(const LoadGeneratorOptions& o, int index) {
  json body = common_fields(o);
  body["messages"] =
      json::array({{{"role", "system"}, {"content", synthetic_text(kSharedPromptSeed, o.system_prompt_words)}},
                   {{"role", "user"},
                    {"content", fmt::format("Question {}-{:x}: ", index, o.level_salt) +
                                    synthetic_text(mix(o.level_salt, static_cast<uint64_t>(index)), o.prompt_words)}}});
  return body;
}

Conversation::Conversation(const LoadGeneratorOptions& o, int id) : o_(o), id_(id) {}

json Conversation::next_request() {
  ++turn_;
  const int words = turn_ == 1 ? o_.prompt_words : o_.turn_words;
  const uint64_t seed = mix(mix(o_.level_salt, static_cast<uint64_t>(id_)), static_cast<uint64_t>(turn_));
  messages_.push_back({{"role", "user"},
                       {"content", fmt::format("Conversation {}-{:x}, turn {}: ", id_, o_.level_salt, turn_) +
                                       synthetic_text(seed, words)}});
  json body = common_fields(o_);
  body["messages"] = messages_;
  return body;
}

void Conversation::add_answer(const std::string& text) {
  messages_.push_back({{"role", "assistant"}, {"content", text}});
}

std::string discover_model(const LoadGeneratorOptions& o) {
  if (!o.model.empty()) return o.model;
  HttpClientResponse r = get(o, "/v1/models", 30);
  SS_CHECK(r.status == 200, "cannot list models at {}:{} ({})", o.host, o.port,
           r.status ? fmt::format("HTTP {}", r.status) : r.error);
  auto j = json::parse(r.body, nullptr, false);
  SS_CHECK(!j.is_discarded() && j.contains("data") && !j["data"].empty(), "GET /v1/models returned no model");
  return j["data"][0].value("id", std::string());
}

LevelResult run_load_level(const LoadGeneratorOptions& options, int concurrency) {
  LoadGeneratorOptions o = options;
  if (o.level_salt == 0) o.level_salt = static_cast<uint64_t>(std::random_device{}()) | 1;
  LevelResult r;
  r.workload = o.workload;
  r.concurrency = concurrency;
  std::vector<Sample> samples;

  if (o.workload == Workload::SharedPrefix) {
    // One untimed request first puts the shared system prompt in the cache: the level measures
    // the steady state of many users on one prompt, not the race of the first wave.
    Sample warm = send_streaming(o, "/v1/chat/completions", shared_prefix_body(o, -1));
    if (!warm.ok) {
      r.errors = 1;
      r.requests = 1;
      r.first_error = "warm-up request: " + warm.error;
      return r;
    }
  }

  const MetricsPage before = scrape(o);
  std::atomic<bool> polling{o.workload == Workload::Capacity && !before.empty()};
  std::thread poller;
  if (polling) {
    poller = std::thread([&] {
      while (polling.load()) {
        const MetricsPage m = scrape(o);
        r.max_running = std::max(r.max_running, metric(m, "num_requests_running"));
        r.max_waiting = std::max(r.max_waiting, metric(m, "num_requests_waiting"));
        r.max_swapped = std::max(r.max_swapped, metric(m, "num_requests_swapped"));
        std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1, o.poll_ms)));
      }
    });
  }

  const auto start = Clock::now();
  switch (o.workload) {
    case Workload::Random:
    case Workload::Capacity:
    case Workload::SharedPrefix: {
      const int n = o.requests > 0                     ? o.requests
                    : o.workload == Workload::Capacity ? concurrency
                                                       : std::max(16, 4 * concurrency);
      samples.resize(static_cast<size_t>(n));
      run_workers(concurrency, n, [&](int i) {
        samples[static_cast<size_t>(i)] = o.workload == Workload::SharedPrefix
                                              ? send_streaming(o, "/v1/chat/completions", shared_prefix_body(o, i))
                                              : send_streaming(o, "/v1/completions", completion_body(o, i));
      });
      break;
    }
    case Workload::MultiTurn: {
      // Each worker runs whole conversations, one turn after another; a failed turn ends its
      // conversation (the turns not sent are not counted).
      const int n = o.conversations > 0 ? o.conversations : concurrency;
      std::vector<std::vector<Sample>> per(static_cast<size_t>(n));
      run_workers(concurrency, n, [&](int id) {
        Conversation conv(o, id);
        for (int t = 0; t < o.turns; ++t) {
          Sample s = send_streaming(o, "/v1/chat/completions", conv.next_request());
          s.turn = conv.turn();
          const bool ok = s.ok;
          conv.add_answer(s.answer);
          per[static_cast<size_t>(id)].push_back(std::move(s));
          if (!ok) break;
        }
      });
      for (auto& v : per)
        for (auto& s : v) samples.push_back(std::move(s));
      break;
    }
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (poller.joinable()) {
    polling = false;
    poller.join();
  }
  const MetricsPage after = scrape(o);
  r.spec_drafts = delta(before, after, "spec_decode_num_drafts_total");
  r.spec_draft_tokens = delta(before, after, "spec_decode_num_draft_tokens_total");
  r.spec_accepted = delta(before, after, "spec_decode_num_accepted_tokens_total");
  r.spec_plain_rows = delta(before, after, "spec_policy_plain_total");
  r.prefill_held_steps = delta(before, after, "engine_prefill_held_steps_total");
  r.cache_queries = delta(before, after, "prefix_cache_queries_total");
  r.cache_hits = delta(before, after, "prefix_cache_hits_total");
  if (o.workload == Workload::Capacity) r.preemptions = delta(before, after, "num_preemptions_total");

  r.requests = static_cast<int>(samples.size());
  std::vector<double> ttft, itl, followup;
  for (const auto& s : samples) {
    if (!s.ok) {
      ++r.errors;
      if (r.first_error.empty()) r.first_error = s.error;
      continue;
    }
    ttft.push_back(s.ttft);
    if (s.turn > 1) followup.push_back(s.ttft);
    if (s.tokens > 1) itl.push_back(s.itl);
    r.output_tokens += s.tokens;
    r.prompt_tokens += s.prompt_tokens;
    if (s.cached_tokens >= 0) r.cached_tokens = std::max<int64_t>(r.cached_tokens, 0) + s.cached_tokens;
  }
  r.ttft_mean = mean(ttft);
  r.ttft_p50 = percentile(ttft, 0.5);
  r.ttft_p90 = percentile(ttft, 0.9);
  r.ttft_p99 = percentile(ttft, 0.99);
  r.itl_mean = mean(itl);
  r.itl_p50 = percentile(itl, 0.5);
  r.itl_p90 = percentile(itl, 0.9);
  r.itl_p99 = percentile(itl, 0.99);
  r.followups = static_cast<int>(followup.size());
  r.followup_ttft_p50 = percentile(followup, 0.5);
  r.followup_ttft_p90 = percentile(followup, 0.9);
  r.followup_ttft_p99 = percentile(followup, 0.99);
  r.tokens_per_s = r.wall_s > 0 ? static_cast<double>(r.output_tokens) / r.wall_s : 0;
  return r;
}

std::string format_results(const std::vector<LevelResult>& results) {
  // Columns for what the results hold: the cache hit rate (from usage.cached_tokens over the prompt
  // tokens of the level's successful requests, and from the server's counters), follow-up turns'
  // TTFT (multi-turn), the capacity probe's gauges, and for speculative servers tokens per verify
  // round (accepted + 1) and the fraction of draft tokens accepted.
  bool spec = false, cache = false, followup = false, capacity = false;
  for (const auto& r : results) {
    spec |= r.spec_drafts > 0;
    cache |= r.cached_tokens >= 0 || r.cache_queries >= 0;
    followup |= r.workload == Workload::MultiTurn;
    capacity |= r.workload == Workload::Capacity;
  }
  std::string head =
      "| concurrency | requests | errors | TTFT mean / p50 / p90 / p99 (ms) | ITL mean / p50 / p90 / p99 (ms) | output "
      "tok/s | wall (s) |";
  std::string rule = "|---:|---:|---:|---|---|---:|---:|";
  if (cache) {
    head += " cached prompt tokens (usage) | cache hit rate (/metrics) |";
    rule += "---:|---:|";
  }
  if (followup) {
    head += " follow-up TTFT p50 / p90 / p99 (ms) |";
    rule += "---|";
  }
  if (capacity) {
    head += " max running | max waiting | max swapped | preemptions |";
    rule += "---:|---:|---:|---:|";
  }
  if (spec) {
    head += " tokens/verify | draft acceptance |";
    rule += "---:|---:|";
  }
  std::string out = head + "\n" + rule + "\n";
  auto pct = [](double num, double den) { return den > 0 ? fmt::format("{:.1f}%", 100.0 * num / den) : "–"; };
  auto count = [](double v) { return v >= 0 ? fmt::format("{:.0f}", v) : std::string("–"); };
  for (const auto& r : results) {
    out += fmt::format(
        "| {} | {} | {} | {:.1f} / {:.1f} / {:.1f} / {:.1f} | {:.2f} / {:.2f} / {:.2f} / {:.2f} | {:.1f} | {:.1f} |",
        r.concurrency, r.requests, r.errors, r.ttft_mean * 1e3, r.ttft_p50 * 1e3, r.ttft_p90 * 1e3, r.ttft_p99 * 1e3,
        r.itl_mean * 1e3, r.itl_p50 * 1e3, r.itl_p90 * 1e3, r.itl_p99 * 1e3, r.tokens_per_s, r.wall_s);
    if (cache) {
      out += r.cached_tokens >= 0 ? fmt::format(" {} of {} ({}) |", r.cached_tokens, r.prompt_tokens,
                                                pct(static_cast<double>(r.cached_tokens), r.prompt_tokens))
                                  : std::string(" – |");
      out += r.cache_queries >= 0 ? fmt::format(" {} |", pct(r.cache_hits, r.cache_queries)) : std::string(" – |");
    }
    if (followup) {
      out += r.followups > 0 ? fmt::format(" {:.1f} / {:.1f} / {:.1f} |", r.followup_ttft_p50 * 1e3,
                                           r.followup_ttft_p90 * 1e3, r.followup_ttft_p99 * 1e3)
                             : std::string(" – |");
    }
    if (capacity) {
      out += fmt::format(" {} | {} | {} | {} |", count(r.max_running), count(r.max_waiting), count(r.max_swapped),
                         count(r.preemptions));
    }
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
