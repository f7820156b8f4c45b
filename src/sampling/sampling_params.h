#pragma once
// Per-request sampling and stopping parameters (OpenAI names where they exist), the processor
// stages and their order, and validation.
//
// Pipeline (sampler.h runs it): the logits row → mask padded ids → history stages (depend on the
// tokens so far) → [T = 0: argmax] → shaping stages (temperature and truncation) → softmax →
// position-keyed inverse-CDF sample.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sampling/types.h"

namespace specserve::sampling {

enum class Stage : uint8_t {
  // History stages: they read the request's tokens so far. The drafter applies exactly these
  // (Sampler::apply_history_processors) so penalties do not collapse acceptance (docs/DESIGN.md §1.5).
  kLogitBias,          // logit += bias[id]
  kRepetitionPenalty,  // HF: logit / p if logit > 0 else logit * p, for ids seen in prompt + output
  kPresenceFrequency,  // OpenAI: logit -= presence * [c > 0] + frequency * c, c = count in output
  kDry,                // llama.cpp DRY: penalise tokens that would extend a repeated sequence
  kMinTokens,          // stop ids (EOS unless ignore_eos, stop_token_ids) masked until min_tokens
  // Shaping stages: only at T > 0 (at T = 0 none of them can change the argmax).
  kTemperature,  // logit / T
  kTopNSigma,    // keep logit >= max - n·σ (σ: population std of the surviving logits)
  kTopK,         // keep the k best by (logit desc, id asc): exactly k, ties to the lower id
  kTopP,         // keep the shortest prefix by (logit desc, id asc) whose mass reaches p
  kMinP,         // keep prob >= min_p · max prob
};

bool is_history_stage(Stage s);
std::string_view stage_name(Stage s);      // "logit_bias", "repetition_penalty", ..., "min_p"
Stage parse_stage(std::string_view name);  // throws Error naming the unknown stage

// logit_bias, repetition_penalty, presence_frequency, dry, min_tokens, temperature, top_n_sigma,
// top_k, top_p, min_p: bias and penalties on raw logits first (as vLLM and llama.cpp do), then
// Hugging Face's warper order (temperature, top-k, top-p, min-p); top-n-sigma is
// temperature-invariant and placed before the other truncations, as llama.cpp does.
std::vector<Stage> default_stage_order();

// "top_k,temperature,..." → stages. Every history stage must come before every shaping stage
// (the drafter applies the history prefix alone); a stage may appear at most once; a stage left
// out is not applied.
std::vector<Stage> parse_stage_order(std::string_view comma_separated);
std::string format_stage_order(const std::vector<Stage>& order);

// DRY ("Don't Repeat Yourself", llama.cpp semantics). A token that would extend a sequence that
// already occurred in the last `penalty_last_n` tokens of prompt + output, making a repeat longer
// than `allowed_length`, is penalised by multiplier · base^(length − allowed_length). Repeats do not
// extend across a sequence breaker.
struct DryParams {
  float multiplier = 0.0f;  // 0 disables DRY
  float base = 1.75f;
  int allowed_length = 2;
  int penalty_last_n = -1;  // −1: the whole history; 0: DRY off
  // Breakers as token-id sequences (what the processor uses). Strings need a tokenizer: the
  // caller converts `sequence_breaker_strings` with dry_breaker_sequences() (dry_breakers.h).
  std::vector<std::vector<TokenId>> sequence_breakers;
  std::vector<std::string> sequence_breaker_strings = {"\n", ":", "\"", "*"};  // llama.cpp's

  bool enabled() const { return multiplier != 0.0f && penalty_last_n != 0; }
};

// Which distribution logprobs are reported from.
enum class LogprobsSource : uint8_t {
  // log-softmax of the logits after the history stages and temperature, before truncation
  // (top-k/top-p/min-p/top-n-sigma); T = 0 (or an order without the temperature stage) counts as
  // T = 1. The default: every listed
  // alternative gets a finite logprob, and the numbers reflect the penalties that shaped the pick.
  kBeforeTruncation,
  // log of the exact distribution the token was drawn from (after truncation; T = 0 is a point
  // mass on the argmax, so the chosen token has logprob 0 and no alternatives).
  kFinal,
};

struct SamplingParams {
  float temperature = 1.0f;         // 0 → greedy: argmax of the history-processed logits, ties to low id
  int top_k = 0;                    // 0 (or −1 in requests) disables
  float top_p = 1.0f;               // (0, 1]; 1 disables
  float min_p = 0.0f;               // [0, 1]; 0 disables
  float top_n_sigma = 0.0f;         // > 0 enables
  float repetition_penalty = 1.0f;  // > 0; 1 disables
  int repetition_window = 0;        // only the last N tokens of prompt + output; 0 = all of them
  float presence_penalty = 0.0f;    // [−2, 2]
  float frequency_penalty = 0.0f;   // [−2, 2]
  std::vector<std::pair<TokenId, float>> logit_bias;  // sorted by id, one entry per id
  DryParams dry;
  std::optional<uint64_t> seed;  // none: the Sampler draws one and reports it
  std::vector<Stage> order = default_stage_order();
  bool logprobs = false;
  int top_logprobs = 0;  // [0, 20]
  LogprobsSource logprobs_source = LogprobsSource::kBeforeTruncation;

  bool greedy() const { return temperature == 0.0f; }
};

struct StopParams {
  std::vector<TokenId> eos_token_ids;   // the model's (config.json / generation_config.json)
  std::vector<TokenId> stop_token_ids;  // the request's
  std::vector<std::string> stop;        // stop strings: matched across tokens, never emitted
  std::optional<int64_t> max_tokens;    // generated tokens; none: until the engine's context limit
  int min_tokens = 0;                   // stop ids are masked and stops ignored before this many
  bool ignore_eos = false;              // EOS neither stops nor is masked

  // The ids that end generation: stop_token_ids, plus eos_token_ids unless ignore_eos.
  std::vector<TokenId> stopping_ids() const;
};

struct RequestParams {
  SamplingParams sampling;
  StopParams stop;
};

// Throw specserve::Error naming the offending field ("top_p must be in (0, 1], got 1.5").
void validate(const SamplingParams& p);
void validate(const StopParams& p);
void validate(const RequestParams& p);

}  // namespace specserve::sampling
