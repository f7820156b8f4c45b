// OpenAI-style request fields → RequestParams, and generation_config.json defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sampling/generation_config.h"
#include "sampling/request_json.h"

namespace specserve::sampling {
namespace {

using nlohmann::json;

std::string error_of(const json& body) {
  try {
    parse_request_params(body, RequestParams{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RequestJson, ParsesEveryField) {
  const json body = json::parse(R"({
    "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "top_n_sigma": 1.5,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.3,
    "repetition_window": 64, "logit_bias": {"50": -100, "7": 2.5}, "seed": 12345,
    "stop": ["</s>", "###"], "stop_token_ids": [2, 3], "max_completion_tokens": 99,
    "max_tokens": 5, "min_tokens": 4, "ignore_eos": true, "logprobs": true, "top_logprobs": 5,
    "logprobs_mode": "final", "dry_multiplier": 0.8, "dry_base": 2.0, "dry_allowed_length": 3,
    "dry_penalty_last_n": 128, "dry_sequence_breakers": ["\n", "::"],
    "sampler_order": ["logit_bias", "dry", "top_k", "temperature"]
  })");
  RequestParams defaults;
  defaults.stop.eos_token_ids = {151645};
  defaults.sampling.dry.sequence_breakers = {{198}};
  const RequestParams r = parse_request_params(body, defaults);
  const SamplingParams& s = r.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.7f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.top_n_sigma, 1.5f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.3f);
  EXPECT_EQ(s.repetition_window, 64);
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<TokenId, float>>{{7, 2.5f}, {50, -100.0f}}));
  EXPECT_EQ(s.seed, 12345u);
  EXPECT_EQ(r.stop.stop, (std::vector<std::string>{"</s>", "###"}));
  EXPECT_EQ(r.stop.stop_token_ids, (std::vector<TokenId>{2, 3}));
  EXPECT_EQ(r.stop.max_tokens, 99);  // max_completion_tokens wins
  EXPECT_EQ(r.stop.min_tokens, 4);
  EXPECT_TRUE(r.stop.ignore_eos);
  EXPECT_EQ(r.stop.eos_token_ids, (std::vector<TokenId>{151645}));  // from the defaults
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 5);
  EXPECT_EQ(s.logprobs_source, LogprobsSource::kFinal);
  EXPECT_FLOAT_EQ(s.dry.multiplier, 0.8f);
  EXPECT_FLOAT_EQ(s.dry.base, 2.0f);
  EXPECT_EQ(s.dry.allowed_length, 3);
  EXPECT_EQ(s.dry.penalty_last_n, 128);
  EXPECT_EQ(s.dry.sequence_breaker_strings, (std::vector<std::string>{"\n", "::"}));
  EXPECT_TRUE(s.dry.sequence_breakers.empty());  // to be re-tokenized by the caller
  EXPECT_EQ(s.order, (std::vector<Stage>{Stage::kLogitBias, Stage::kDry, Stage::kTopK, Stage::kTemperature}));
}

TEST(RequestJson, AbsentAndNullKeepDefaults) {
  RequestParams defaults;
  defaults.sampling.temperature = 0.6f;
  defaults.sampling.top_k = 20;
  const RequestParams r = parse_request_params(json::parse(R"({"temperature": null, "stop": "x"})"), defaults);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.6f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_EQ(r.stop.stop, std::vector<std::string>{"x"});
}

TEST(RequestJson, ExtensionConventions) {
  const RequestParams r = parse_request_params(json::parse(R"({"top_k": -1, "top_n_sigma": -1, "logprobs": 3,
                                                                "seed": -5})"),
                                               RequestParams{});
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.top_n_sigma, 0.0f);
  EXPECT_TRUE(r.sampling.logprobs);  // legacy completions: logprobs = n
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  EXPECT_EQ(r.sampling.seed, static_cast<uint64_t>(int64_t{-5}));
}

TEST(RequestJson, ErrorsNameTheField) {
  EXPECT_NE(error_of(json::parse(R"({"temperature": "hot"})")).find("temperature"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"temperature": -1})")).find("temperature"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"top_p": 0})")).find("top_p"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"min_p": 2})")).find("min_p"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"logit_bias": {"abc": 1}})")).find("logit_bias"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"logit_bias": {"5": 101}})")).find("logit_bias"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"stop": [1]})")).find("stop"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"stop": ""})")).find("stop"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"max_tokens": 0})")).find("max_tokens"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"top_logprobs": 3})")).find("top_logprobs"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"logprobs": true, "top_logprobs": 21})")).find("top_logprobs"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"min_tokens": 10, "max_tokens": 5})")).find("min_tokens"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"dry_base": 0.5, "dry_multiplier": 1})")).find("dry_base"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"dry_allowed_length": 0})")).find("dry_allowed_length"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"repetition_penalty": 0})")).find("repetition_penalty"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"seed": 1.5})")).find("seed"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"sampler_order": "top_k,bogus"})")).find("bogus"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"sampler_order": "temperature,dry"})")).find("dry"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"logprobs_mode": "raw"})")).find("logprobs_mode"), std::string::npos);
  EXPECT_NE(error_of(json::parse("[]")).find("object"), std::string::npos);
}

TEST(GenerationConfig, AppliesModelDefaults) {
  // Qwen3's generation_config.json.
  const json cfg = json::parse(R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
                                   "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
                                   "transformers_version": "4.51.0"})");
  RequestParams d;
  apply_generation_config(cfg, d);
  EXPECT_FLOAT_EQ(d.sampling.temperature, 0.6f);
  EXPECT_EQ(d.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(d.sampling.top_p, 0.95f);
  EXPECT_EQ(d.stop.eos_token_ids, (std::vector<TokenId>{151645, 151643}));

  RequestParams g;
  apply_generation_config(json::parse(R"({"do_sample": false, "temperature": 0.7, "eos_token_id": 2})"), g);
  EXPECT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.stop.eos_token_ids, std::vector<TokenId>{2});
  EXPECT_THROW(apply_generation_config(json::parse(R"({"top_p": 7})"), g), Error);
}

}  // namespace
}  // namespace specserve::sampling
