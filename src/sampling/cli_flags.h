#pragma once
// The sampling and stopping flags of `specserve generate` (and any other subcommand that samples),
// registered on a CLI11 app. Flags are overlays: resolve() starts from the defaults the caller
// knows only after parsing (typically the model's generation_config.json) and replaces just the
// fields the user gave.
//
//   SamplingFlags flags;  flags.add_to(*cmd);
//   ... after parsing and loading the model ...
//   RequestParams params = flags.resolve(model_defaults);   // throws specserve::Error
//
// Flags: --temperature --top-k --top-p --min-p --top-n-sigma --repetition-penalty
// --repetition-window --presence-penalty --frequency-penalty --logit-bias ID=BIAS (repeatable)
// --dry-multiplier --dry-base --dry-allowed-length --dry-penalty-last-n --dry-sequence-breaker STR
// (repeatable) --sampler-order a,b,c --seed --stop STR (repeatable) --stop-token-id ID (repeatable)
// --max-tokens --min-tokens --ignore-eos --logprobs N --logprobs-mode before_truncation|final
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"

namespace specserve::sampling {

class SamplingFlags {
 public:
  void add_to(CLI::App &app);
  RequestParams resolve(const RequestParams &defaults) const;

 private:
  static bool given(const CLI::Option *o) { return o != nullptr && o->count() > 0; }

  float temperature_ = 0, top_p_ = 0, min_p_ = 0, top_n_sigma_ = 0, repetition_penalty_ = 0;
  float presence_penalty_ = 0, frequency_penalty_ = 0, dry_multiplier_ = 0, dry_base_ = 0;
  int top_k_ = 0, repetition_window_ = 0, dry_allowed_length_ = 0, dry_penalty_last_n_ = 0;
  int min_tokens_ = 0, logprobs_ = 0;
  int64_t max_tokens_ = 0;
  bool ignore_eos_ = false;
  uint64_t seed_ = 0;
  std::vector<std::string> logit_bias_, dry_breakers_, stop_;
  std::vector<int64_t> stop_token_ids_;
  std::string sampler_order_, logprobs_mode_;

  CLI::Option *temperature_opt_ = nullptr, *top_p_opt_ = nullptr, *min_p_opt_ = nullptr;
  CLI::Option *top_n_sigma_opt_ = nullptr, *repetition_penalty_opt_ = nullptr, *presence_penalty_opt_ = nullptr;
  CLI::Option *frequency_penalty_opt_ = nullptr, *dry_multiplier_opt_ = nullptr, *dry_base_opt_ = nullptr;
  CLI::Option *top_k_opt_ = nullptr, *repetition_window_opt_ = nullptr, *dry_allowed_length_opt_ = nullptr;
  CLI::Option *dry_penalty_last_n_opt_ = nullptr, *min_tokens_opt_ = nullptr, *logprobs_opt_ = nullptr;
  CLI::Option *max_tokens_opt_ = nullptr, *seed_opt_ = nullptr, *logit_bias_opt_ = nullptr;
  CLI::Option *dry_breakers_opt_ = nullptr, *stop_opt_ = nullptr, *stop_token_ids_opt_ = nullptr;
  CLI::Option *sampler_order_opt_ = nullptr, *logprobs_mode_opt_ = nullptr, *ignore_eos_opt_ = nullptr;
};

}  // namespace specserve::sampling
