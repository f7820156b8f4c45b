// The processors against Hugging Face transformers' logits processors, on fixtures recorded by
// tools/reference/sampling/make_fixtures.py (RepetitionPenaltyLogitsProcessor,
// TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper, and the chain
// generate() builds from them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include "sampling/history_processors.h"
#include "sampling/sampler.h"
#include "sampling/truncation.h"

namespace specserve::sampling {
namespace {

using nlohmann::json;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

json load_fixture() {
  const std::string path = std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/sampling/hf_logits_processors.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing fixture " << path << " (tools/reference/sampling/make_fixtures.py)";
  return in.good() ? json::parse(in) : json::object();
}

std::vector<float> floats(const json& v) {
  std::vector<float> out;
  for (const auto& x : v) out.push_back(x.is_null() ? kNegInf : x.get<float>());
  return out;
}

std::set<TokenId> kept(const std::vector<float>& row) {
  std::set<TokenId> ids;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] != kNegInf) ids.insert(TokenId(i));
  }
  return ids;
}

std::vector<TokenId> finite_ids(const std::vector<float>& row) {
  const auto s = kept(row);
  return {s.begin(), s.end()};
}

TEST(HfFixtures, EveryProcessorMatchesTransformers) {
  const json doc = load_fixture();
  ASSERT_TRUE(doc.contains("cases"));
  EXPECT_EQ(doc["reference"].get<std::string>().rfind("transformers", 0), 0u)
      << "the fixture must come from transformers, not the script's self-check";
  std::set<std::string> seen;
  TruncationScratch scratch;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"];
    const std::string proc = c["processor"];
    const json& prm = c["params"];
    seen.insert(proc);
    std::vector<float> row = floats(c["scores"]);
    const std::vector<float> expected = floats(c["expected"]);
    const std::vector<TokenId> ids = c["input_ids"].get<std::vector<TokenId>>();
    ASSERT_EQ(row.size(), expected.size()) << name;
    SCOPED_TRACE(name);

    if (proc == "repetition_penalty" || proc == "temperature") {
      if (proc == "repetition_penalty") {
        apply_repetition_penalty(row, SamplerState(ids).window_counts(), prm["penalty"].get<float>());
      } else {
        apply_temperature(row, Candidates::of(finite_ids(row)), prm["temperature"].get<float>());
      }
      for (size_t i = 0; i < row.size(); ++i) EXPECT_FLOAT_EQ(row[i], expected[i]) << "id " << i;
    } else if (proc == "top_k" || proc == "top_p" || proc == "min_p") {
      Candidates cands = Candidates::of(finite_ids(row));
      if (proc == "top_k") truncate_top_k(row, cands, prm["top_k"].get<int>(), scratch);
      if (proc == "top_p") truncate_top_p(row, cands, prm["top_p"].get<float>(), scratch);
      if (proc == "min_p") truncate_min_p(row, cands, prm["min_p"].get<float>());
      EXPECT_EQ(std::set<TokenId>(cands.ids.begin(), cands.ids.end()), kept(expected));
      for (TokenId id : cands.ids) EXPECT_EQ(row[id], expected[id]) << "kept values are unchanged";
    } else if (proc == "chain") {
      RequestParams p;
      p.sampling.repetition_penalty = prm["repetition_penalty"].get<float>();
      p.sampling.temperature = prm["temperature"].get<float>();
      p.sampling.top_k = prm["top_k"].get<int>();
      p.sampling.top_p = prm["top_p"].get<float>();
      p.sampling.min_p = prm["min_p"].get<float>();
      p.sampling.seed = 0;
      const int64_t v = int64_t(row.size());
      Sampler s(p, {v, v});
      std::vector<float> probs(row.size());
      SamplerWorkspace ws;
      s.processed_distribution(row, s.make_state(ids), ws, probs);
      for (size_t i = 0; i < row.size(); ++i) {
        EXPECT_EQ(probs[i] > 0.0f, expected[i] > 0.0f) << "id " << i;
        EXPECT_NEAR(probs[i], expected[i], 2e-6) << "id " << i;
      }
    } else {
      ADD_FAILURE() << "unknown processor " << proc;
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"repetition_penalty", "temperature", "top_k", "top_p", "min_p", "chain"}));
}

}  // namespace
}  // namespace specserve::sampling
