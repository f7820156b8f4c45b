// The prefix cache on a GPU (docs/DESIGN.md §5): on the CUDA backend, with the trained dense (Qwen3) and
// hybrid (Qwen3.5, Gated DeltaNet) targets, the engine with the cache on gives bit for bit the tokens and
// logprobs of the engine with it off, T = 0 and seeded T > 0, f32 and bf16 weights: a long shared system
// prompt (sequential, then concurrent on a warm and on a cold cache), a multi-turn conversation, and dense
// hits at multiples of 16 that are not multiples of 64 (48, 208, 336: the prefill after the hit runs in
// chunks off the 64-grid, so the GPU prefill kernels' bits must not depend on where a chunk starts, §5.1).
// With the DFlash drafter on the GPU, speculative requests served from the cache give the tokens of plain
// decoding with the cache off, and the drafts and acceptances, step by step, of the same speculative
// requests with the cache off. Under a KV budget far below the requests' needs, the cache and preemption
// by swap together still give every request's output alone. Every test checks the hit lengths, so none
// passes with the cache silently missing.
#include <algorithm>

#include "../../engine/prefix_cache_test_util.h"
#include "../../spec/spec_test_util.h"
#include "../model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;
using specserve::test::CacheRun;
using specserve::test::concat;
using specserve::test::expect_pool_is_the_cache;
using specserve::test::expect_same_outputs;
using specserve::test::expect_same_steps;
using specserve::test::random_tokens;
using specserve::test::run_one;
using specserve::test::run_sequentially;
using specserve::test::run_together;
using specserve::test::synthetic;
using specserve::test::with_logprobs;

struct GpuCacheCase {
  std::string pair, dtype;
  float temperature;
};
void PrintTo(const GpuCacheCase& c, std::ostream* os) { *os << c.pair << " " << c.dtype << " T=" << c.temperature; }
std::string case_name(const ::testing::TestParamInfo<GpuCacheCase>& i) {
  std::string n = i.param.pair + "_" + i.param.dtype + (i.param.temperature > 0 ? "_seeded" : "_greedy");
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

engine::EngineOptions cache_options(bool cache, int prefill_chunk = 128, int64_t kv_blocks = 4096) {
  engine::EngineOptions o = engine_options(8);
  o.max_queue = 64;
  o.prefill_chunk = prefill_chunk;
  o.kv_blocks = kv_blocks;
  o.prefix_cache = cache;
  o.prefix_cache_state_interval = 64;
  return o;
}

class CudaPrefixCacheBase : public ::testing::TestWithParam<GpuCacheCase> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
  bool hybrid() const { return GetParam().pair.find("hybrid") != std::string::npos; }
  // The hit of a prompt whose every block is cached: at most P - 1 positions, a whole number of blocks
  // (dense) or a multiple of 64 (hybrid, a snapshot point).
  int64_t full_hit(const engine::GenerationRequest& r) const {
    const auto p = static_cast<int64_t>(r.prompt.size());
    return hybrid() ? (p - 1) / 64 * 64 : (p - 1) / 16 * 16;
  }
  // The target (and drafter) of the case's pair on the GPU.
  Pair load() const {
    Pair pair(GetParam().pair, GetParam().dtype, "cuda");
    EXPECT_EQ(pair.target->backend(), "cuda");
    return pair;
  }
  engine::GenerationRequest request(const std::vector<int32_t>& prompt, int64_t max_tokens, uint64_t seed,
                                    bool speculate = true) const {
    const float t = GetParam().temperature;
    engine::GenerationRequest r =
        with_logprobs(t > 0 ? sampled_request(prompt, max_tokens, seed, t, 0.9f) : greedy_request(prompt, max_tokens));
    r.speculate = speculate;
    return r;
  }
};

// ---- the target alone: cache on against cache off, tokens and logprobs bit for bit ---------------------

class CudaPrefixCache : public CudaPrefixCacheBase {};

TEST_P(CudaPrefixCache, LongSharedSystemPromptSequentialAndConcurrent) {
  Pair pair = load();
  TargetModel& target = *pair.target;
  const auto system = random_tokens(340, 3);
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(concat(system, random_tokens(10 + 7 * i, 300 + i)), 16, 9 + i));
  auto off = make_engine(target, nullptr, cache_options(false));
  const auto expected = run_sequentially(*off, reqs);
  // Dense: every whole block of the shared 340 tokens, 336 (not a multiple of 64: the chunk after it
  // starts off the grid); hybrid: its last snapshot point, 320 (state interval 64).
  const int64_t hit = hybrid() ? 320 : 336;
  {
    auto on = make_engine(target, nullptr, cache_options(true));
    const auto got = run_sequentially(*on, reqs);
    expect_same_outputs(got, expected);
    EXPECT_EQ(got[0].cached, 0);
    for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i].cached, hit) << "request " << i;
    EXPECT_EQ(on->metrics().prefix_cache_hits.load(), hit * 5);
    expect_pool_is_the_cache(target, *on);
    // Concurrently on the warm cache: every request hits its whole prompt, the same outputs again.
    const auto warm = run_together(*on, reqs);
    expect_same_outputs(warm, expected);
    for (size_t i = 0; i < warm.size(); ++i) EXPECT_EQ(warm[i].cached, full_hit(reqs[i])) << "request " << i;
    expect_pool_is_the_cache(target, *on);
  }
  {
    // Concurrently on a cold cache: whichever requests hit, the same outputs.
    auto on = make_engine(target, nullptr, cache_options(true));
    expect_same_outputs(run_together(*on, reqs), expected);
    expect_pool_is_the_cache(target, *on);
  }
}

TEST_P(CudaPrefixCache, MultiTurnConversation) {
  Pair pair = load();
  TargetModel& target = *pair.target;
  auto off = make_engine(target, nullptr, cache_options(false));
  engine::EngineOptions o = cache_options(true);
  o.prefix_cache_state_interval = 2048;  // only each prompt's last grid point is kept
  auto on = make_engine(target, nullptr, o);
  std::vector<int32_t> history = random_tokens(300, 5);  // last grid points past kMinLastStop (256): kept
  int64_t last_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const auto r = request(history, 20, 31 + turn);
    const CacheRun a = run_one(*off, r), b = run_one(*on, r);
    EXPECT_EQ(b.tokens, a.tokens) << "turn " << turn;
    EXPECT_EQ(b.logprobs, a.logprobs) << "turn " << turn;
    // Turn 2 is turn 1's prompt + its answer + a new message: only the previous prompt was prefilled, so
    // dense hits end at its last whole block (288, 336), hybrid ones at its last multiple of 64 (256, 320).
    const int64_t expect_hit = turn == 0 ? 0 : hybrid() ? (last_prompt - 1) / 64 * 64 : last_prompt / 16 * 16;
    EXPECT_EQ(b.cached, expect_hit) << "turn " << turn;
    last_prompt = static_cast<int64_t>(history.size());
    history = concat(concat(history, a.tokens), random_tokens(30, 60 + turn));
  }
  expect_pool_is_the_cache(target, *on);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaPrefixCache,
    ::testing::Values(GpuCacheCase{"dense-trained", "f32", 0.0f}, GpuCacheCase{"hybrid-trained", "f32", 0.0f},
                      GpuCacheCase{"dense-trained", "f32", 0.8f}, GpuCacheCase{"hybrid-trained", "f32", 0.8f},
                      GpuCacheCase{"dense-trained", "bf16", 0.0f}, GpuCacheCase{"hybrid-trained", "bf16", 0.8f}),
    case_name);

// A dense hit at a multiple of 16 that is not one of 64: the cold run prefills [0, P) in chunks on the
// 64-grid (or in one), the warm one [h, P) in chunks starting at h — the same bits only if a prefill row
// depends on its position alone.
class CudaPrefixCacheDense : public CudaPrefixCacheBase {};

TEST_P(CudaPrefixCacheDense, HitsOffTheSixtyFourGridAreExact) {
  Pair pair = load();
  TargetModel& target = *pair.target;
  for (int chunk : {64, 512}) {
    auto off = make_engine(target, nullptr, cache_options(false, chunk));
    auto on = make_engine(target, nullptr, cache_options(true, chunk));
    for (int shared_len : {48, 208}) {
      const auto shared = random_tokens(shared_len, 40 + shared_len);
      for (int i = 0; i < 3; ++i) {
        const auto r = request(concat(shared, random_tokens(90 + 5 * i, 70 + i)), 16, 3 + i);
        const CacheRun a = run_one(*off, r), b = run_one(*on, r);
        const std::string what = "chunk " + std::to_string(chunk) + " hit " + std::to_string(shared_len);
        EXPECT_EQ(b.tokens, a.tokens) << what << " request " << i;
        EXPECT_EQ(b.logprobs, a.logprobs) << what << " request " << i;
        EXPECT_EQ(b.cached, i == 0 ? 0 : shared_len) << what << " request " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPrefixCacheDense,
                         ::testing::Values(GpuCacheCase{"dense-trained", "f32", 0.0f},
                                           GpuCacheCase{"dense-trained", "f32", 0.8f},
                                           GpuCacheCase{"dense-trained", "bf16", 0.0f}),
                         case_name);

// ---- with the DFlash drafter on the GPU ------------------------------------------------------------------

class CudaPrefixCacheSpec : public CudaPrefixCacheBase {
 protected:
  // The drafter in the row-invariant order, so that its drafts depend on its context only, not on which
  // rows a step projects (a hit projects fewer) or on the batch (§5.4).
  Pair load_row_invariant() const {
    Pair pair = load();
    EXPECT_EQ(pair.drafter->backend(), "cuda");
    pair.drafter->set_matmul_order(MatmulOrder::RowInvariant);
    return pair;
  }
  static engine::EngineOptions spec_options(bool cache) {
    engine::EngineOptions o = cache_options(cache, 64);
    o.max_seqs = 16;
    return o;
  }
};

TEST_P(CudaPrefixCacheSpec, SharedSystemPromptEqualsPlainAndTheCacheOffSteps) {
  Pair pair = load_row_invariant();
  const auto system = concat(random_tokens(60, 3), synthetic(250, 0));  // 310 tokens
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(concat(system, synthetic(10 + 5 * i, i)), 24, 100 + i));

  auto plain = make_engine(*pair.target, nullptr, spec_options(false));
  spec::DFlashProposer off_proposer(*pair.drafter, {.gamma = 7});
  auto off = make_engine(*pair.target, &off_proposer, spec_options(false));
  spec::DFlashProposer on_proposer(*pair.drafter, {.gamma = 7});
  auto on = make_engine(*pair.target, &on_proposer, spec_options(true));
  const auto p = run_sequentially(*plain, reqs);
  const auto want = run_sequentially(*off, reqs);
  const auto got = run_sequentially(*on, reqs);
  const int64_t hit = hybrid() ? 256 : 304;  // 304 = 19 blocks, off the 64-grid
  int accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string what = "request " + std::to_string(i);
    EXPECT_EQ(got[i].tokens, p[i].tokens) << what;  // speculative with the cache == plain without
    EXPECT_EQ(want[i].tokens, p[i].tokens) << what;
    expect_same_steps(got[i], want[i], what);  // the same drafts and acceptances as the cache off
    EXPECT_EQ(got[i].cached, i == 0 ? 0 : hit) << what;
    for (const auto& s : got[i].steps) accepted += s.accepted;
  }
  EXPECT_GT(accepted, 0) << "the trained pair must actually speculate";
  // Concurrently on the warm cache (every request hits its whole prompt), and on a cold one.
  const auto warm = run_together(*on, reqs);
  spec::DFlashProposer cold_proposer(*pair.drafter, {.gamma = 7});
  auto cold_engine = make_engine(*pair.target, &cold_proposer, spec_options(true));
  const auto cold = run_together(*cold_engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string what = "request " + std::to_string(i);
    EXPECT_EQ(warm[i].cached, full_hit(reqs[i])) << what;
    expect_same_steps(warm[i], want[i], "warm, together: " + what);
    EXPECT_EQ(cold[i].tokens, p[i].tokens) << "cold, together: " << what;
  }
}

TEST_P(CudaPrefixCacheSpec, MultiTurnConversation) {
  Pair pair = load_row_invariant();
  auto plain = make_engine(*pair.target, nullptr, spec_options(false));
  spec::DFlashProposer off_proposer(*pair.drafter, {.gamma = 7});
  auto off = make_engine(*pair.target, &off_proposer, spec_options(false));
  spec::DFlashProposer on_proposer(*pair.drafter, {.gamma = 7});
  engine::EngineOptions o = spec_options(true);
  o.prefix_cache_state_interval = 2048;  // each prompt's last grid point only
  auto on = make_engine(*pair.target, &on_proposer, o);
  // 300 tokens and more: each prompt's last grid point is past the engine's kMinLastStop (256), so it is kept.
  std::vector<int32_t> history = concat(random_tokens(20, 9), synthetic(280, 3));
  int64_t last_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const auto r = request(history, 24, 7 + turn);
    const CacheRun p = run_one(*plain, r), want = run_one(*off, r), got = run_one(*on, r);
    const std::string what = "turn " + std::to_string(turn);
    EXPECT_EQ(got.tokens, p.tokens) << what;
    expect_same_steps(got, want, what);
    const int64_t expect_hit = turn == 0 ? 0 : hybrid() ? (last_prompt - 1) / 64 * 64 : last_prompt / 16 * 16;
    EXPECT_EQ(got.cached, expect_hit) << what;
    last_prompt = static_cast<int64_t>(history.size());
    history = concat(concat(history, want.tokens), synthetic(30, 11 + turn));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPrefixCacheSpec,
                         ::testing::Values(GpuCacheCase{"dense-trained", "f32", 0.0f},
                                           GpuCacheCase{"hybrid-trained", "f32", 0.0f},
                                           GpuCacheCase{"dense-trained", "f32", 0.8f},
                                           GpuCacheCase{"hybrid-trained", "f32", 0.8f}),
                         case_name);

// ---- the cache and preemption by swap under a small KV budget -------------------------------------------

struct PreemptCase {
  GpuCacheCase c;
  bool speculate;
};

class CudaPrefixCachePreemption : public ::testing::TestWithParam<PreemptCase> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaPrefixCachePreemption, EveryRequestEqualsItsRunAlone) {
  const GpuCacheCase& c = GetParam().c;
  const bool speculate = GetParam().speculate;
  Pair pair(c.pair, c.dtype, "cuda");
  pair.drafter->set_matmul_order(MatmulOrder::RowInvariant);
  spec::DFlashProposer alone_proposer(*pair.drafter, {.gamma = 7});
  spec::DFlashProposer proposer(*pair.drafter, {.gamma = 7});
  // 16 requests, three of four on one 70-token system prompt; the longest needs 10 blocks, all of them ~140.
  const auto system = concat(random_tokens(20, 12), synthetic(50, 1));
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < 16; ++i) {
    const auto prompt = concat(i % 4 ? system : random_tokens(40, 90 + i), synthetic(5 + 3 * i, i));
    reqs.push_back(with_logprobs(c.temperature > 0 ? sampled_request(prompt, 30, 70 + i, c.temperature, 0.9f)
                                                   : greedy_request(prompt, 30)));
  }
  auto off = make_engine(*pair.target, speculate ? &alone_proposer : nullptr, cache_options(false));
  const auto alone = run_sequentially(*off, reqs);
  engine::EngineOptions o = cache_options(true, 64, 24);
  o.max_seqs = 32;
  o.max_batch_rows = 160;
  auto on = make_engine(*pair.target, speculate ? &proposer : nullptr, o);
  // Warm the cache with the system prompt, then everything at once.
  EXPECT_EQ(run_one(*on, reqs[1]).tokens, alone[1].tokens);
  const auto together = run_together(*on, reqs);
  expect_same_outputs(together, alone);
  if (speculate) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(together[i].steps.size(), alone[i].steps.size()) << "request " << i;
      for (size_t k = 0; k < alone[i].steps.size(); ++k)
        EXPECT_EQ(together[i].steps[k].drafts, alone[i].steps[k].drafts) << "request " << i << " step " << k;
    }
  }
  EXPECT_GT(on->metrics().preemptions.load(), 0u);
  EXPECT_GT(on->metrics().prefix_cache_hits.load(), 0);
  EXPECT_LE(on->metrics().prefix_cache_blocks.load(), 24);
  EXPECT_EQ(on->metrics().swap_in_bytes.load(), on->metrics().swap_out_bytes.load());
  if (!speculate) expect_pool_is_the_cache(*pair.target, *on);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPrefixCachePreemption,
                         ::testing::Values(PreemptCase{{"dense-trained", "f32", 0.0f}, false},
                                           PreemptCase{{"hybrid-trained", "f32", 0.0f}, false},
                                           PreemptCase{{"dense-trained", "f32", 0.8f}, false},
                                           PreemptCase{{"hybrid-trained", "f32", 0.8f}, false},
                                           PreemptCase{{"dense-trained", "f32", 0.0f}, true},
                                           PreemptCase{{"hybrid-trained", "f32", 0.8f}, true}),
                         [](const auto& i) {
                           std::string n = i.param.c.pair + (i.param.c.temperature > 0 ? "_seeded" : "_greedy") +
                                           (i.param.speculate ? "_dflash" : "_plain");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve
