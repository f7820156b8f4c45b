// The prefix cache with the DFlash drafter (docs/DESIGN.md §5): on the trained dense and hybrid pairs,
// T = 0 and seeded T > 0, speculative requests served from the cache give exactly the tokens of plain
// decoding with the cache off, and the drafts and acceptances, step by step, of the same speculative
// requests with the cache off — so a hit left the drafter's context complete (its cached K/V are the ones
// the request would have projected). Shared system prompts (sequential and concurrent) and multi-turn
// conversations; a speculative request skips entries without drafter blocks, a plain one uses them. The
// hybrid pair also sharded over 2 ranks (every rank's KV slice and DeltaNet snapshot cached).
#include "../engine/prefix_cache_test_util.h"
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;
using specserve::test::concat;
using specserve::test::expect_same_steps;
using specserve::test::random_tokens;
using specserve::test::synthetic;

struct CacheCase {
  std::string pair;
  float temperature;
  int ranks = 0;  // > 0: the target sharded over this many ranks (the CPU simulation, docs/DESIGN.md §6.3)
};
void PrintTo(const CacheCase& c, std::ostream* os) {
  *os << c.pair << " T=" << c.temperature << (c.ranks > 0 ? " N=" + std::to_string(c.ranks) : "");
}

class PrefixCacheLossless : public ::testing::TestWithParam<CacheCase> {
 protected:
  bool hybrid() const { return GetParam().pair.find("hybrid") != std::string::npos; }
  engine::GenerationRequest request(const std::vector<int32_t>& prompt, int64_t max_tokens, uint64_t seed,
                                    bool speculate = true) const {
    engine::GenerationRequest r = GetParam().temperature > 0
                                      ? sampled_request(prompt, max_tokens, seed, GetParam().temperature, 0.9f)
                                      : greedy_request(prompt, max_tokens);
    r.speculate = speculate;
    return r;
  }
};

engine::EngineOptions options(bool cache) {
  engine::EngineOptions o = engine_options(16);
  o.prefill_chunk = 64;
  o.prefix_cache = cache;
  o.prefix_cache_state_interval = 64;
  return o;
}

TEST_P(PrefixCacheLossless, SharedSystemPrompt) {
  Pair pair(GetParam().pair, "f32", "cpu", GetParam().ranks);
  const auto system = concat(random_tokens(60, 3), synthetic(90, 0));  // 150 tokens
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(concat(system, synthetic(10 + 5 * i, i)), 24, 100 + i));

  auto plain = make_engine(*pair.target, nullptr, options(false));
  DFlashProposer off_proposer(*pair.drafter, {.gamma = 7});
  auto off = make_engine(*pair.target, &off_proposer, options(false));
  DFlashProposer on_proposer(*pair.drafter, {.gamma = 7});
  auto on = make_engine(*pair.target, &on_proposer, options(true));
  int accepted = 0;
  const int64_t hit = hybrid() ? 128 : 144;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestRun p = run_request(*plain, reqs[i]);
    const RequestRun want = run_request(*off, reqs[i]);
    const RequestRun got = run_request(*on, reqs[i]);
    EXPECT_EQ(got.tokens, p.tokens) << "request " << i;  // spec == plain with the cache on
    expect_same_steps(got, want, "request " + std::to_string(i));
    EXPECT_EQ(got.usage.cached_tokens, i == 0 ? 0 : hit) << "request " << i;
    for (const auto& s : got.steps) accepted += s.accepted;
  }
  EXPECT_GT(accepted, 0);
  // Concurrently on the warm cache, and on a cold one.
  const auto want = run_all(*off, reqs);
  const auto warm = run_all(*on, reqs);
  DFlashProposer cold_proposer(*pair.drafter, {.gamma = 7});
  auto cold_engine = make_engine(*pair.target, &cold_proposer, options(true));
  const auto cold = run_all(*cold_engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(warm[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(cold[i].tokens, want[i].tokens) << "request " << i;
  }
}

TEST_P(PrefixCacheLossless, MultiTurnConversation) {
  Pair pair(GetParam().pair, "f32", "cpu", GetParam().ranks);
  DFlashProposer off_proposer(*pair.drafter, {.gamma = 7});
  auto off = make_engine(*pair.target, &off_proposer, options(false));
  DFlashProposer on_proposer(*pair.drafter, {.gamma = 7});
  engine::EngineOptions o = options(true);
  o.prefix_cache_state_interval = 2048;  // each prompt's last grid point only
  auto on = make_engine(*pair.target, &on_proposer, o);
  // 300 tokens and more: each prompt's last grid point is past the engine's kMinLastStop (256), so it is kept.
  std::vector<int32_t> history = concat(random_tokens(20, 9), synthetic(280, 3));
  int64_t last_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const auto r = request(history, 24, 7 + turn);
    const RequestRun want = run_request(*off, r);
    const RequestRun got = run_request(*on, r);
    expect_same_steps(got, want, "turn " + std::to_string(turn));
    const int64_t expect_hit = turn == 0 ? 0 : hybrid() ? (last_prompt - 1) / 64 * 64 : last_prompt / 16 * 16;
    EXPECT_EQ(got.usage.cached_tokens, expect_hit) << "turn " << turn;
    last_prompt = static_cast<int64_t>(history.size());
    history = concat(concat(history, want.tokens), synthetic(30, 11 + turn));
  }
}

// Entries a plain request made have no drafter blocks: a speculative request does not use them (its
// drafter would lack the context) but adds its drafter blocks to them; the next one hits.
TEST_P(PrefixCacheLossless, SpeculativeHitsNeedTheDrafterBlocks) {
  Pair pair(GetParam().pair, "f32", "cpu", GetParam().ranks);
  DFlashProposer on_proposer(*pair.drafter, {.gamma = 7});
  auto on = make_engine(*pair.target, &on_proposer, options(true));
  DFlashProposer off_proposer(*pair.drafter, {.gamma = 7});
  auto off = make_engine(*pair.target, &off_proposer, options(false));
  const auto prompt = concat(random_tokens(30, 4), synthetic(70, 5));  // 100 tokens
  const int64_t hit = hybrid() ? 64 : 96;
  const RequestRun plain = run_request(*on, request(prompt, 16, 1, false));
  EXPECT_EQ(plain.usage.cached_tokens, 0);
  const RequestRun want = run_request(*off, request(prompt, 16, 1));
  const RequestRun first = run_request(*on, request(prompt, 16, 1));
  EXPECT_EQ(first.usage.cached_tokens, 0);
  expect_same_steps(first, want, "first speculative");
  const RequestRun second = run_request(*on, request(prompt, 16, 1));
  EXPECT_EQ(second.usage.cached_tokens, hit);
  expect_same_steps(second, want, "second speculative");
  EXPECT_EQ(plain.tokens, want.tokens);
  // A plain request uses the entries too.
  EXPECT_EQ(run_request(*on, request(prompt, 16, 1, false)).usage.cached_tokens, hit);
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefixCacheLossless,
                         ::testing::Values(CacheCase{"dense-trained", 0.0f}, CacheCase{"hybrid-trained", 0.0f},
                                           CacheCase{"dense-trained", 0.8f}, CacheCase{"hybrid-trained", 0.8f},
                                           // Shared blocks and DeltaNet snapshots of every rank's slice.
                                           CacheCase{"hybrid-trained", 0.8f, 2}),
                         [](const auto& info) {
                           std::string n = info.param.pair + (info.param.temperature > 0 ? "_seeded" : "_greedy") +
                                           (info.param.ranks > 0 ? "_tp" + std::to_string(info.param.ranks) : "");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve::spec
