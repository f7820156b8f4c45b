// The sampling flags on a CLI11 app: given flags overlay the defaults, absent ones keep them.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sampling/cli_flags.h"

namespace specserve::sampling {
namespace {

RequestParams parse(std::vector<std::string> args, const RequestParams& defaults = RequestParams{}) {
  CLI::App app("test");
  SamplingFlags flags;
  flags.add_to(app);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  app.parse(args);
  return flags.resolve(defaults);
}

TEST(SamplingFlags, OverlayOnlyWhatWasGiven) {
  RequestParams defaults;
  defaults.sampling.temperature = 0.6f;
  defaults.sampling.top_k = 20;
  const RequestParams r = parse({"--top-p",
                                 "0.8",
                                 "--repetition-penalty",
                                 "1.3",
                                 "--stop",
                                 "END",
                                 "--stop",
                                 "\n\n",
                                 "--logit-bias",
                                 "5=-2.5",
                                 "--logprobs",
                                 "4",
                                 "--seed",
                                 "7",
                                 "--dry-multiplier",
                                 "0.8",
                                 "--max-tokens",
                                 "32",
                                 "--min-tokens",
                                 "2",
                                 "--ignore-eos",
                                 "--stop-token-id",
                                 "9",
                                 "--sampler-order",
                                 "logit_bias,temperature,top_p"},
                                defaults);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.6f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.8f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.3f);
  EXPECT_EQ(r.stop.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<TokenId, float>>{{5, -2.5f}}));
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 4);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_FLOAT_EQ(r.sampling.dry.multiplier, 0.8f);
  EXPECT_EQ(r.stop.max_tokens, 32);
  EXPECT_EQ(r.stop.min_tokens, 2);
  EXPECT_TRUE(r.stop.ignore_eos);
  EXPECT_EQ(r.stop.stop_token_ids, std::vector<TokenId>{9});
  EXPECT_EQ(r.sampling.order, (std::vector<Stage>{Stage::kLogitBias, Stage::kTemperature, Stage::kTopP}));
}

TEST(SamplingFlags, BadValuesAreErrors) {
  EXPECT_THROW(parse({"--top-p", "1.5"}), Error);
  EXPECT_THROW(parse({"--logit-bias", "x=1"}), Error);
  EXPECT_THROW(parse({"--logit-bias", "5"}), Error);
  EXPECT_THROW(parse({"--logprobs", "21"}), Error);
  EXPECT_THROW(parse({"--sampler-order", "top_k,nope"}), Error);
  EXPECT_THROW(parse({"--top-k", "abc"}), CLI::ParseError);
}

}  // namespace
}  // namespace specserve::sampling
