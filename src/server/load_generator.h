#pragma once
// An HTTP load generator for OpenAI-compatible servers (specserve or any peer): N concurrent
// clients send streaming requests and time every SSE chunk, giving time-to-first-token,
// inter-token latency, aggregate output tokens/s and the prefix cache's hit rate per concurrency
// level. Workloads (docs/SERVER.md, "Benchmark"):
//   random         /v1/completions, distinct synthetic prompts (nothing shared between requests)
//   shared-prefix  /v1/chat/completions, one long system prompt shared by every request + a short
//                  distinct user message
//   multi-turn     /v1/chat/completions, conversations whose every turn sends the history, the
//                  previous answer (the text the server returned) and a new user message
//   capacity       random requests all sent at once while /metrics is polled: how many sequences
//                  the server holds at once (num_requests_running), and whether any request failed
// It measures, never asserts (docs/DESIGN.md §3).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace specserve::server {

enum class Workload { Random, SharedPrefix, MultiTurn, Capacity };
// "random", "shared-prefix", "multi-turn", "capacity"; throws Error on another name.
Workload parse_workload(const std::string& name);
const char* workload_name(Workload w);

struct LoadGeneratorOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string model;  // "" = the first id of GET /v1/models
  Workload workload = Workload::Random;
  // Per concurrency level; 0 = max(16, 4 × concurrency), for capacity = the concurrency (all at once).
  // multi-turn counts conversations instead (`conversations`).
  int requests = 0;
  int max_tokens = 128;
  int prompt_words = 64;  // prompts (random, capacity), user messages (shared-prefix), first turns (multi-turn)
  // When set, prompts are token ids instead: this pattern repeated to prompt_words ids, rotated by
  // the request index (for models with a synthetic vocabulary, e.g. the DFlash test fixtures).
  // random and capacity only.
  std::vector<int32_t> prompt_pattern;
  // When > 0 (random and capacity, no pattern): prompts are prompt_words token ids drawn uniformly from
  // [0, prompt_id_vocab), a pure function of level_salt and the request index: distinct requests (with
  // near certainty), and the same salt sends the same prompts again (bench serve-load --acceptance).
  int64_t prompt_id_vocab = 0;
  // Each request carries a "seed", a pure function of level_salt and its index: sampling at T > 0 repeats.
  bool seed_requests = false;
  double temperature = 0;
  bool ignore_eos = true;  // every request generates exactly max_tokens (comparable runs)
  int timeout_s = 600;
  int system_prompt_words = 2000;  // shared-prefix: the system prompt every request shares
  int turns = 4;                   // multi-turn: turns per conversation
  int turn_words = 64;             // multi-turn: words of each follow-up user message
  int conversations = 0;           // multi-turn: per level; 0 = the concurrency
  int poll_ms = 50;                // capacity: /metrics polling interval
  // Distinguishes levels: prompts (and conversations) of different levels share no prefix, so a
  // level never hits what an earlier level left in the cache. run_load_level sets it when 0.
  uint64_t level_salt = 0;
};

struct LevelResult {
  Workload workload = Workload::Random;
  int concurrency = 0;
  int requests = 0;  // requests sent (multi-turn: over every turn)
  int errors = 0;
  double wall_s = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  // Seconds, over successful requests.
  double ttft_mean = 0, ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0;
  double itl_mean = 0, itl_p50 = 0, itl_p90 = 0, itl_p99 = 0;  // per request: (t_last − t_first) / (tokens − 1)
  double tokens_per_s = 0;                                     // output tokens / wall time
  // multi-turn: TTFT of the turns after the first (the ones a prefix cache serves); 0 when none.
  int followups = 0;
  double followup_ttft_p50 = 0, followup_ttft_p90 = 0, followup_ttft_p99 = 0;
  // usage.prompt_tokens_details.cached_tokens summed over successful requests; -1 when the server
  // never sent the field.
  int64_t cached_tokens = -1;
  // From the server's /metrics (specserve's names, else vLLM's) over the level; -1 when not exposed.
  double spec_drafts = -1, spec_draft_tokens = -1, spec_accepted = -1;
  double spec_plain_rows = -1;                 // decode rows the draft-length policy kept at 0 drafts (specserve only)
  double prefill_held_steps = -1;              // steps the prefill hold kept short prompt chunks back (specserve only)
  double cache_queries = -1, cache_hits = -1;  // prefix_cache_queries_total / prefix_cache_hits_total
  // capacity: the most requests the server reported running / waiting / swapped out at one poll,
  // and the preemptions during the level.
  double max_running = -1, max_waiting = -1, max_swapped = -1, preemptions = -1;
  std::string first_error;
};

// Runs one level of `concurrency` clients.
LevelResult run_load_level(const LoadGeneratorOptions& options, int concurrency);

// Resolves options.model from the server when empty; throws Error when unreachable.
std::string discover_model(const LoadGeneratorOptions& options);

// A Markdown table of results (columns for what the results hold: cache, follow-up TTFT,
// capacity, speculation).
std::string format_results(const std::vector<LevelResult>& results);

// --- Request construction (exposed for tests) ---

// Synthetic text of `words` words from a 16-word vocabulary, a pure function of `seed`. The bodies
// below put a request-specific header before it, so distinct requests differ from their first
// tokens on.
std::string synthetic_text(uint64_t seed, int words);

// The body of streaming request `index` of a level (random / capacity: /v1/completions).
nlohmann::json completion_body(const LoadGeneratorOptions& o, int index);
// shared-prefix (/v1/chat/completions): the system prompt (the same for every request of every level)
// and user message `index`.
nlohmann::json shared_prefix_body(const LoadGeneratorOptions& o, int index);

// One multi-turn conversation: each turn's request carries every earlier message, the answers as the
// server returned them.
class Conversation {
 public:
  Conversation(const LoadGeneratorOptions& o, int id);
  // Appends the next user message (the first has prompt_words words, later ones turn_words) and
  // returns the request body (/v1/chat/completions).
  nlohmann::json next_request();
  // Appends the server's answer to the last request as the assistant message.
  void add_answer(const std::string& text);
  const nlohmann::json& messages() const { return messages_; }
  int turn() const { return turn_; }  // user messages sent so far

 private:
  const LoadGeneratorOptions& o_;
  int id_;
  int turn_ = 0;
  nlohmann::json messages_ = nlohmann::json::array();
};

}  // namespace specserve::server
