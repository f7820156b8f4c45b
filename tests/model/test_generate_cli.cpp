// `specserve generate` end to end on the fixtures: the --json object's shape, greedy token ids equal
// to transformers' continuation, and clear errors (non-zero exit) for bad input.
#include <nlohmann/json.hpp>

#include <cstdio>

#include <filesystem>

#include "../specserve_cli.h"
#include "model_test_util.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace specserve {
namespace {

using namespace specserve::testing;

CliRun run(const std::string& args) { return run_specserve("generate " + args); }

std::string join(const std::vector<int32_t>& ids) { return join_ids(ids); }

TEST(GenerateCli, GreedyJsonMatchesTransformers) {
  for (const auto& name : all_fixtures()) {
    Reference ref(fixture_dir(name));
    auto want = ref.ids("greedy_ids");
    CliRun r = run("--model " + fixture_dir(name) + " --prompt-ids " + join(ref.ids("prompt_ids")) + " --max-tokens " +
                   std::to_string(want.size()) + " --ignore-eos --json --threads 2");
    ASSERT_EQ(r.status, 0) << name << ": " << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("token_ids").get<std::vector<int32_t>>(), want) << name;
    EXPECT_EQ(j.at("finish_reason"), "length");
    EXPECT_FALSE(j.contains("text"));  // no tokenizer files in the fixture
    const auto& s = j.at("stats");
    EXPECT_EQ(s.at("prompt_tokens").get<int64_t>(), static_cast<int64_t>(ref.ids("prompt_ids").size()));
    EXPECT_EQ(s.at("generated_tokens").get<int64_t>(), static_cast<int64_t>(want.size()));
    for (const char* k : {"prefill_ms", "decode_ms", "tokens_per_s"}) EXPECT_TRUE(s.at(k).is_number()) << k;
  }
}

TEST(GenerateCli, StopsAtEosAndRejectsBadInput) {
  const std::string model = "--model " + fixture_dir("qwen3_tied");
  // eos_token_id is 2 in the fixture config: forcing it via a huge logit bias stops at once.
  CliRun r = run(model + " --prompt-ids 5,6,7 --max-tokens 10 --logit-bias 2=100 --json");
  ASSERT_EQ(r.status, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("finish_reason"), "stop");
  EXPECT_EQ(run(model + " --prompt-ids 1,x --max-tokens 4").status, 1);
  EXPECT_EQ(run(model + " --prompt-ids 100000 --max-tokens 4").status, 1);
  EXPECT_EQ(run(model + " --prompt hello --max-tokens 4").status, 1);  // no tokenizer yet
  EXPECT_EQ(run("--model /nonexistent --prompt-ids 1 --max-tokens 4").status, 1);
}

TEST(GenerateCli, SeededSamplingIsReproducible) {
  const std::string args = "--model " + fixture_dir("qwen3_5_flat") +
                           " --prompt-ids 3,1,4,1,5 --max-tokens 12 --temperature 0.9 --seed 7 --ignore-eos --json";
  CliRun a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(nlohmann::json::parse(a.out).at("token_ids"), nlohmann::json::parse(b.out).at("token_ids"));
}

}  // namespace
}  // namespace specserve

namespace specserve {
namespace {

// With a tokenizer in the model directory: --prompt encodes like the tokenizer library, and "text"
// is the decoded output. Uses the committed demo model (a trained tiny Qwen3.5 hybrid).
TEST(GenerateCli, PromptTextAndOutputTextWithTokenizer) {
  const std::string dir = std::string(SPECSERVE_SOURCE_DIR) + "/models/demo-coder/target";
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << dir;
  auto tok = tokenizer::Tokenizer::load(dir + "/tokenizer.json");
  const std::string text = "def add(a, b):";
  CliRun by_text = run("--model " + dir + " --prompt '" + text + "' --max-tokens 12 --ignore-eos --json");
  CliRun by_ids =
      run("--model " + dir + " --prompt-ids " + join(tok.encode(text)) + " --max-tokens 12 --ignore-eos --json");
  ASSERT_EQ(by_text.status, 0) << by_text.out;
  ASSERT_EQ(by_ids.status, 0) << by_ids.out;
  auto a = nlohmann::json::parse(by_text.out), b = nlohmann::json::parse(by_ids.out);
  EXPECT_EQ(a.at("token_ids"), b.at("token_ids"));
  EXPECT_EQ(a.at("stats").at("prompt_tokens").get<size_t>(), tok.encode(text).size());
  const auto ids = a.at("token_ids").get<std::vector<int32_t>>();
  EXPECT_EQ(a.at("text").get<std::string>(), tok.decode(ids));
}

}  // namespace
}  // namespace specserve

namespace specserve {
namespace {

// --chat renders one user message with the checkpoint's template (generation prompt included).
TEST(GenerateCli, ChatUsesTheModelsTemplate) {
  const std::string dir = std::string(SPECSERVE_SOURCE_DIR) + "/models/demo-coder/target";
  auto tok = tokenizer::Tokenizer::load(dir + "/tokenizer.json");
  nlohmann::ordered_json request;
  request["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "add two numbers"}}});
  request["add_generation_prompt"] = true;
  const auto ids = tok.encode(chat::ChatTemplate::load(dir).render(request));
  CliRun chat = run("--model " + dir + " --prompt 'add two numbers' --chat --max-tokens 6 --ignore-eos --json");
  CliRun raw = run("--model " + dir + " --prompt-ids " + join(ids) + " --max-tokens 6 --ignore-eos --json");
  ASSERT_EQ(chat.status, 0) << chat.out;
  ASSERT_EQ(raw.status, 0) << raw.out;
  auto a = nlohmann::json::parse(chat.out), b = nlohmann::json::parse(raw.out);
  EXPECT_EQ(a.at("stats").at("prompt_tokens").get<size_t>(), ids.size());
  EXPECT_EQ(a.at("token_ids"), b.at("token_ids"));
}

}  // namespace
}  // namespace specserve
