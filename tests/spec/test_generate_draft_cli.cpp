// `specserve generate --draft` end to end (issue 5 deliverable 5): the same token ids as without a
// drafter (T=0 and seeded T>0, gamma 3 and 15, dense and hybrid pairs, and the shipped demo pair),
// the speculation stats and the --trace records (checked for consistency and against the reference
// trace of a fixture pair), and clear errors for bad flag combinations.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../specserve_cli.h"

namespace specserve {
namespace {

using testing::CliRun;

CliRun run_cli(const std::string& args) { return testing::run_specserve(args); }

nlohmann::json generate_json(const std::string& args) {
  CliRun r = run_cli("generate " + args + " --json --threads 2");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.out;
  if (r.status != 0) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

std::string join(const std::vector<int32_t>& ids) { return testing::join_ids(ids); }

std::string fixture(const std::string& name) {
  return std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/dflash/" + name;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// The stats and trace of one speculative run are consistent with its output.
void check_spec_records(const nlohmann::json& j, int gamma, size_t prompt_len) {
  const auto& s = j.at("stats");
  ASSERT_TRUE(s.contains("steps") && s.contains("tau") && s.contains("accepted_total")) << s.dump();
  EXPECT_EQ(s.at("gamma").get<int>(), gamma);
  const auto& steps = j.at("steps");
  ASSERT_EQ(s.at("steps").get<size_t>(), steps.size());
  EXPECT_EQ(s.at("accept_rate_per_position").size(), static_cast<size_t>(gamma));
  int64_t pos = static_cast<int64_t>(prompt_len);  // the first pending token (picked by the prefill)
  int64_t accepted = 0, committed = 0;
  std::vector<int32_t> stream = {j.at("token_ids").at(0).get<int32_t>()};
  for (const auto& st : steps) {
    EXPECT_EQ(st.at("pos").get<int64_t>(), pos);
    const int a = st.at("accepted").get<int>();
    const auto drafts = st.at("drafts").get<std::vector<int32_t>>();
    const auto emitted = st.at("emitted").get<std::vector<int32_t>>();
    EXPECT_LE(drafts.size(), static_cast<size_t>(gamma));  // fewer only near max_tokens
    ASSERT_LE(a, static_cast<int>(drafts.size()));
    ASSERT_EQ(emitted.size(), static_cast<size_t>(a) + 1);
    for (int i = 0; i < a; ++i) EXPECT_EQ(emitted[i], drafts[i]);  // accepted drafts are emitted as drafted
    if (a < static_cast<int>(drafts.size())) EXPECT_NE(emitted[a], drafts[a]);  // the first mismatch
    stream.insert(stream.end(), emitted.begin(), emitted.end());
    pos += static_cast<int64_t>(emitted.size());
    accepted += a;
    committed += static_cast<int64_t>(emitted.size());
  }
  EXPECT_EQ(s.at("accepted_total").get<int64_t>(), accepted);
  if (!steps.empty()) EXPECT_NEAR(s.at("tau").get<double>(), static_cast<double>(committed) / steps.size(), 1e-9);
  // The output is the first token and the emitted runs, cut where a stop / max_tokens fell.
  const auto out = j.at("token_ids").get<std::vector<int32_t>>();
  ASSERT_LE(out.size(), stream.size());
  EXPECT_EQ(out, std::vector<int32_t>(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(out.size())));
}

TEST(GenerateDraftCli, SameTokensAsPlainDecoding) {
  struct Case {
    std::string target, draft;
    std::vector<int32_t> prompt;
  };
  std::vector<Case> cases;
  for (const char* name : {"dense-trained", "hybrid-trained"}) {
    const auto trace = read_json(fixture(name) + "/trace.json");
    cases.push_back(
        {fixture(name) + "/target", fixture(name) + "/draft", trace.at("prompt_ids").get<std::vector<int32_t>>()});
  }
  const std::string demo = std::string(SPECSERVE_SOURCE_DIR) + "/models/demo-coder";
  cases.push_back({demo + "/target", demo + "/drafter", {755, 3905, 7268, 11, 1108, 1020}});  // some demo ids
  for (const auto& c : cases) {
    for (const std::string sampling : {"", " --temperature 0.8 --seed 11"}) {
      const std::string base =
          "--model " + c.target + " --prompt-ids " + join(c.prompt) + " --max-tokens 40 --ignore-eos" + sampling;
      const auto plain = generate_json(base);
      ASSERT_TRUE(plain.contains("token_ids"));
      EXPECT_EQ(plain.at("token_ids").size(), 40u);
      EXPECT_FALSE(plain.at("stats").contains("tau"));
      std::vector<std::vector<int32_t>> first_drafts;
      for (int gamma : {15, 3}) {
        const auto spec =
            generate_json(base + " --draft " + c.draft + " --gamma " + std::to_string(gamma) + " --trace");
        ASSERT_TRUE(spec.contains("token_ids"));
        EXPECT_EQ(spec.at("token_ids"), plain.at("token_ids")) << c.target << sampling << " gamma " << gamma;
        check_spec_records(spec, gamma, c.prompt.size());
        first_drafts.push_back(spec.at("steps").at(0).at("drafts").get<std::vector<int32_t>>());
      }
      // A drafter over the 32,768 lowest ids (and the added tokens: the demo has a tokenizer) drafts
      // only those and changes no token.
      if (c.draft == demo + "/drafter") {
        const auto sub = generate_json(base + " --draft " + c.draft + " --draft-vocab 32768 --trace");
        EXPECT_EQ(sub.at("token_ids"), plain.at("token_ids")) << "--draft-vocab 32768" << sampling;
        for (const auto& st : sub.at("steps"))
          for (int32_t d : st.at("drafts").get<std::vector<int32_t>>()) EXPECT_TRUE(d < 32768 || d >= 151643) << d;
      }
      // Every step drafts with the trained (full) block; gamma only limits how many drafts are
      // verified: the first step of gamma 3 sees the first 3 drafts of gamma 15's first step.
      if (sampling.empty()) {
        ASSERT_EQ(first_drafts[1].size(), 3u);
        EXPECT_EQ(first_drafts[1], std::vector<int32_t>(first_drafts[0].begin(), first_drafts[0].begin() + 3));
      }
    }
  }
}

// The CLI's --trace of a fixture pair in f32 is the reference loop's trace (z-lab dflash_generate,
// tools/reference/dflash/make_fixtures.py), step by step.
TEST(GenerateDraftCli, TraceReproducesTheReference) {
  for (const char* name : {"dense-trained", "hybrid-trained"}) {
    const auto ref = read_json(fixture(name) + "/trace.json");
    const auto prompt = ref.at("prompt_ids").get<std::vector<int32_t>>();
    const auto j = generate_json("--model " + fixture(name) + "/target --draft " + fixture(name) +
                                 "/draft --dtype f32 --ignore-eos --trace --prompt-ids " + join(prompt) +
                                 " --max-tokens " + std::to_string(ref.at("max_new_tokens").get<int>()));
    ASSERT_TRUE(j.contains("steps")) << name;
    EXPECT_EQ(j.at("token_ids"), ref.at("generated_ids")) << name;
    const auto& got = j.at("steps");
    const auto& want = ref.at("steps");
    // The reference drafts a full block up to its end position; the engine drafts no more than can
    // still be emitted (as in test_reference_traces.cpp), so its last steps see a prefix.
    const int64_t end = static_cast<int64_t>(prompt.size()) + ref.at("max_new_tokens").get<int64_t>();
    size_t expected_steps = 0;
    for (const auto& s : want) expected_steps += s.at("pos").get<int64_t>() + 1 < end ? 1 : 0;
    ASSERT_EQ(got.size(), expected_steps) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      const int64_t pos = got[i].at("pos").get<int64_t>();
      EXPECT_EQ(pos, want[i].at("pos").get<int64_t>()) << name << " step " << i;
      const auto n = static_cast<size_t>(std::min<int64_t>(15, end - pos - 2));
      const auto ref_drafts = want[i].at("drafts").get<std::vector<int32_t>>();
      EXPECT_EQ(got[i].at("drafts").get<std::vector<int32_t>>(),
                std::vector<int32_t>(ref_drafts.begin(), ref_drafts.begin() + static_cast<std::ptrdiff_t>(n)))
          << name << " step " << i;
      const int accepted = std::min(want[i].at("accepted").get<int>(), static_cast<int>(n));
      EXPECT_EQ(got[i].at("accepted").get<int>(), accepted) << name << " step " << i;
      const auto ref_emitted = want[i].at("emitted").get<std::vector<int32_t>>();
      EXPECT_EQ(got[i].at("emitted").get<std::vector<int32_t>>(),
                std::vector<int32_t>(ref_emitted.begin(), ref_emitted.begin() + accepted + 1))
          << name << " step " << i;
    }
  }
}

TEST(GenerateDraftCli, RefusesBadCombinations) {
  const std::string dense = fixture("dense-trained"), hybrid = fixture("hybrid-trained");
  const std::string base = "generate --model " + dense + "/target --prompt-ids 1,2,3 --max-tokens 8 ";
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft").status, 0);
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft --gamma 16").status, 1);          // block 16: at most 15
  EXPECT_EQ(run_cli(base + "--gamma 3").status, 1);                                       // needs --draft
  EXPECT_EQ(run_cli(base + "--trace").status, 1);                                         // needs --draft
  EXPECT_EQ(run_cli(base + "--draft " + hybrid + "/draft").status, 1);                    // another target's drafter
  EXPECT_NE(run_cli(base + "--draft " + dense + "/draft --verify-mode nope").status, 0);  // a parse error
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft --draft-sampling sample --verify-mode raw-argmax").status, 1);
  EXPECT_EQ(run_cli(base + "--draft /nonexistent").status, 1);
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft --draft-matmul exact").status, 0);
  EXPECT_NE(run_cli(base + "--draft " + dense + "/draft --draft-matmul fastest").status, 0);  // a parse error
  EXPECT_EQ(run_cli(base + "--draft-matmul exact").status, 1);                                // needs --draft
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft --draft-vocab 200").status, 0);
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft --draft-vocab 0").status, 1);
  EXPECT_EQ(run_cli(base + "--draft " + dense + "/draft --draft-vocab /nonexistent/ids.txt").status, 1);
  EXPECT_EQ(run_cli(base + "--draft-vocab 200").status, 1);  // needs --draft
  // --help warns that raw-argmax is not lossless.
  const CliRun help = run_cli("generate --help");
  EXPECT_NE(help.out.find("NOT lossless"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace specserve
