#include "sampling/cli_flags.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace specserve::sampling {
namespace {

constexpr const char* kGroup = "Sampling";

// "ID=BIAS" → (id, bias).
std::pair<TokenId, float> parse_bias(const std::string& text) {
  const size_t eq = text.find('=');
  SS_CHECK(eq != std::string::npos, "--logit-bias expects ID=BIAS, got '{}'", text);
  TokenId id = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + eq, id);
  SS_CHECK(ec == std::errc() && end == text.data() + eq && id >= 0, "--logit-bias: '{}' is not a token id",
           text.substr(0, eq));
  float bias = 0.0f;
  try {
    size_t used = 0;
    bias = std::stof(text.substr(eq + 1), &used);
    SS_CHECK(used == text.size() - eq - 1, "--logit-bias: '{}' is not a number", text.substr(eq + 1));
  } catch (const std::logic_error&) {
    fail("--logit-bias: '{}' is not a number", text.substr(eq + 1));
  }
  return {id, bias};
}

}  // namespace

void SamplingFlags::add_to(CLI::App& app) {
  temperature_opt_ =
      app.add_option("--temperature", temperature_, "Sampling temperature; 0 = greedy (argmax)")->group(kGroup);
  top_k_opt_ = app.add_option("--top-k", top_k_, "Keep the k most likely tokens (0 = off)")->group(kGroup);
  top_p_opt_ =
      app.add_option("--top-p", top_p_, "Nucleus sampling: smallest set with this mass (1 = off)")->group(kGroup);
  min_p_opt_ =
      app.add_option("--min-p", min_p_, "Drop tokens below min_p x the top probability (0 = off)")->group(kGroup);
  top_n_sigma_opt_ =
      app.add_option("--top-n-sigma", top_n_sigma_, "Keep logits >= max - n*sigma (0 = off)")->group(kGroup);
  repetition_penalty_opt_ = app.add_option("--repetition-penalty", repetition_penalty_,
                                           "HF repetition penalty on prompt + output tokens (1 = off)")
                                ->group(kGroup);
  repetition_window_opt_ = app.add_option("--repetition-window", repetition_window_,
                                          "Repetition penalty sees only the last N tokens (0 = all)")
                               ->group(kGroup);
  presence_penalty_opt_ =
      app.add_option("--presence-penalty", presence_penalty_, "OpenAI presence penalty over output tokens")
          ->group(kGroup);
  frequency_penalty_opt_ =
      app.add_option("--frequency-penalty", frequency_penalty_, "OpenAI frequency penalty over output tokens")
          ->group(kGroup);
  logit_bias_opt_ =
      app.add_option("--logit-bias", logit_bias_, "ID=BIAS added to a token's logit (repeatable)")->group(kGroup);
  dry_multiplier_opt_ =
      app.add_option("--dry-multiplier", dry_multiplier_, "DRY penalty strength (0 = off)")->group(kGroup);
  dry_base_opt_ = app.add_option("--dry-base", dry_base_, "DRY exponential base (default 1.75)")->group(kGroup);
  dry_allowed_length_opt_ = app.add_option("--dry-allowed-length", dry_allowed_length_,
                                           "Repeats up to this length are not penalised (default 2)")
                                ->group(kGroup);
  dry_penalty_last_n_opt_ =
      app.add_option("--dry-penalty-last-n", dry_penalty_last_n_, "DRY scans the last N tokens (-1 = all, 0 = off)")
          ->group(kGroup);
  dry_breakers_opt_ = app.add_option("--dry-sequence-breaker", dry_breakers_,
                                     "DRY sequence breaker string (repeatable; replaces the defaults)")
                          ->group(kGroup);
  sampler_order_opt_ =
      app.add_option("--sampler-order", sampler_order_,
                     "Comma-separated stages (default " + format_stage_order(default_stage_order()) + ")")
          ->group(kGroup);
  seed_opt_ = app.add_option("--seed", seed_, "Sampling seed (default: random, reported)")->group(kGroup);
  stop_opt_ = app.add_option("--stop", stop_, "Stop string, not included in the output (repeatable)")->group(kGroup);
  stop_token_ids_opt_ = app.add_option("--stop-token-id", stop_token_ids_, "Stop token id (repeatable)")->group(kGroup);
  max_tokens_opt_ = app.add_option("--max-tokens", max_tokens_, "Maximum number of generated tokens")->group(kGroup);
  min_tokens_opt_ =
      app.add_option("--min-tokens", min_tokens_, "EOS and stops are ignored before this many tokens")->group(kGroup);
  ignore_eos_opt_ = app.add_flag("--ignore-eos", ignore_eos_, "Do not stop at EOS")->group(kGroup);
  logprobs_opt_ =
      app.add_option("--logprobs", logprobs_, "Report the chosen token's logprob and the top N (0-20)")->group(kGroup);
  logprobs_mode_opt_ =
      app.add_option("--logprobs-mode", logprobs_mode_, "before_truncation (default) or final")->group(kGroup);
}

RequestParams SamplingFlags::resolve(const RequestParams& defaults) const {
  RequestParams out = defaults;
  SamplingParams& s = out.sampling;
  StopParams& stop = out.stop;
  if (given(temperature_opt_)) s.temperature = temperature_;
  if (given(top_k_opt_)) s.top_k = std::max(0, top_k_);
  if (given(top_p_opt_)) s.top_p = top_p_;
  if (given(min_p_opt_)) s.min_p = min_p_;
  if (given(top_n_sigma_opt_)) s.top_n_sigma = std::max(0.0f, top_n_sigma_);
  if (given(repetition_penalty_opt_)) s.repetition_penalty = repetition_penalty_;
  if (given(repetition_window_opt_)) s.repetition_window = std::max(0, repetition_window_);
  if (given(presence_penalty_opt_)) s.presence_penalty = presence_penalty_;
  if (given(frequency_penalty_opt_)) s.frequency_penalty = frequency_penalty_;
  if (given(logit_bias_opt_)) {
    s.logit_bias.clear();
    for (const auto& item : logit_bias_) s.logit_bias.push_back(parse_bias(item));
    std::sort(s.logit_bias.begin(), s.logit_bias.end());
  }
  if (given(dry_multiplier_opt_)) s.dry.multiplier = dry_multiplier_;
  if (given(dry_base_opt_)) s.dry.base = dry_base_;
  if (given(dry_allowed_length_opt_)) s.dry.allowed_length = dry_allowed_length_;
  if (given(dry_penalty_last_n_opt_)) s.dry.penalty_last_n = dry_penalty_last_n_;
  if (given(dry_breakers_opt_)) {
    s.dry.sequence_breaker_strings = dry_breakers_;
    s.dry.sequence_breakers.clear();  // the caller re-tokenizes (dry_breakers.h)
  }
  if (given(sampler_order_opt_)) s.order = parse_stage_order(sampler_order_);
  if (given(seed_opt_)) s.seed = seed_;
  if (given(logprobs_opt_)) {
    SS_CHECK(logprobs_ >= 0 && logprobs_ <= 20, "--logprobs must be in [0, 20], got {}", logprobs_);
    s.logprobs = true;
    s.top_logprobs = logprobs_;
  }
  if (given(logprobs_mode_opt_)) {
    if (logprobs_mode_ == "before_truncation")
      s.logprobs_source = LogprobsSource::kBeforeTruncation;
    else if (logprobs_mode_ == "final")
      s.logprobs_source = LogprobsSource::kFinal;
    else
      fail("--logprobs-mode must be before_truncation or final, got '{}'", logprobs_mode_);
  }
  if (given(stop_opt_)) stop.stop = stop_;
  if (given(stop_token_ids_opt_)) {
    stop.stop_token_ids.clear();
    for (int64_t id : stop_token_ids_) {
      SS_CHECK(id >= 0 && id <= std::numeric_limits<TokenId>::max(), "--stop-token-id: {} is not a token id", id);
      stop.stop_token_ids.push_back(static_cast<TokenId>(id));
    }
  }
  if (given(max_tokens_opt_)) stop.max_tokens = max_tokens_;
  if (given(min_tokens_opt_)) stop.min_tokens = min_tokens_;
  if (given(ignore_eos_opt_)) stop.ignore_eos = ignore_eos_;
  validate(out);
  return out;
}

}  // namespace specserve::sampling
