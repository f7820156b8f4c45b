#pragma once
// An HTTP load generator for OpenAI-compatible servers (specserve or any peer): N concurrent
// clients send streaming /v1/completions requests and time every SSE chunk, giving
// time-to-first-token, inter-token latency and aggregate output tokens/s per concurrency level.
// It measures, never asserts (docs/DESIGN.md §3).
#include <cstdint>
#include <string>
#include <vector>

namespace specserve::server {

struct LoadOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string model;  // "" = the first id of GET /v1/models
  int requests = 0;   // per concurrency level; 0 = max(16, 4 × concurrency)
  int max_tokens = 128;
  int prompt_words = 64;  // prompts are synthetic text of about this many words
  // When set, prompts are token ids instead: this pattern repeated to prompt_words ids, rotated by
  // the request index (for models with a synthetic vocabulary, e.g. the DFlash test fixtures).
  std::vector<int32_t> prompt_pattern;
  double temperature = 0;
  bool ignore_eos = true;  // every request generates exactly max_tokens (comparable runs)
  int timeout_s = 600;
};

struct LevelResult {
  int concurrency = 0;
  int requests = 0;
  int errors = 0;
  double wall_s = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  // Seconds, over successful requests.
  double ttft_mean = 0, ttft_p50 = 0, ttft_p99 = 0;
  double itl_mean = 0, itl_p50 = 0, itl_p99 = 0;  // per request: (t_last − t_first) / (tokens − 1)
  double tokens_per_s = 0;                        // output tokens / wall time
  // From the server's /metrics (specserve's names) over the level; -1 when not exposed.
  double spec_drafts = -1, spec_draft_tokens = -1, spec_accepted = -1;
  std::string first_error;
};

// Runs one level of `concurrency` clients.
LevelResult run_load_level(const LoadOptions& options, int concurrency);

// Resolves options.model from the server when empty; throws Error when unreachable.
std::string discover_model(const LoadOptions& options);

// A Markdown table of results.
std::string format_results(const std::vector<LevelResult>& results);

}  // namespace specserve::server
