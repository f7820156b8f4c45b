// The prefix cache (engine/prefix_cache.h, docs/DESIGN.md §5): the index on its own (hash chain, token
// check against collisions, reference counts, LRU eviction of unheld leaves and snapshots, pool
// accounting, eviction never freeing a block in use), and the engine with the cache on against the engine
// with it off on tiny dense and hybrid targets: shared system prompts (sequential and concurrent),
// multi-turn conversations, fully cached prompts, a dense hit off the 64-grid, a hybrid prompt cut at its
// last grid point only from 256 on, preemption by swap and eviction under a small KV budget — identical
// tokens and logprobs, T = 0 and seeded T > 0, hits counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "engine/prefix_cache.h"
#include "engine_test_util.h"
#include "prefix_cache_test_util.h"

using namespace specserve;
using namespace specserve::engine;
using namespace specserve::test;

namespace {

// ---- the index ---------------------------------------------------------------------------------------

std::shared_ptr<KvBlockPool> test_pool() {
  return std::make_shared<KvBlockPool>(KvGeometry{1, 1, 4, DType::F32});  // 16 positions x 1 layer x 4 floats x2
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(1000 * salt + i);
  return t;
}

// Inserts the full blocks of `prompt` as one sequence would, holding each; returns the entries.
std::vector<PrefixEntryId> insert_chain(PrefixCache& c, KvBlockPool& pool, const std::vector<int32_t>& prompt) {
  std::vector<PrefixEntryId> ids;
  PrefixEntryId parent = kNoPrefixEntry;
  for (size_t j = 0; (j + 1) * 16 <= prompt.size(); ++j) {
    void* b = pool.allocate();
    auto in = c.insert(parent, std::span(prompt).subspan(j * 16, 16), b);
    EXPECT_NE(in.id, kNoPrefixEntry);
    if (!in.created) pool.release(b);
    ids.push_back(in.id);
    parent = in.id;
  }
  return ids;
}

TEST(PrefixCacheIndex, HashChainMatchesWholeBlocksOfTheSamePrefixOnly) {
  auto pool = test_pool();
  PrefixCache c(pool, nullptr);
  const auto a = tokens(50, 1);  // 3 full blocks
  auto ids = insert_chain(c, *pool, a);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(c.match(a, 10).size(), 3u);
  EXPECT_EQ(c.match(a, 2).size(), 2u);
  auto b = a;
  b[20] = 7;  // differs in block 1
  EXPECT_EQ(c.match(b, 10).size(), 1u);
  auto shifted = a;
  shifted.insert(shifted.begin(), 5);  // the same blocks after another prefix are other keys
  EXPECT_EQ(c.match(shifted, 10).size(), 0u);
  // The same tokens again: the existing entries come back, nothing new is made.
  auto again = insert_chain(c, *pool, a);
  EXPECT_EQ(again, ids);
  EXPECT_EQ(c.entries(), 3);
  EXPECT_EQ(c.refs(ids[0]), 2);
  c.release(ids);
  c.release(again);
  EXPECT_EQ(pool->blocks_in_use(), 3);
}

uint64_t always_colliding(uint64_t, std::span<const int32_t>) { return 42; }

TEST(PrefixCacheIndex, AHashCollisionIsAMissNeverAFalseHit) {
  auto pool = test_pool();
  PrefixCache c(pool, nullptr, &always_colliding);
  const auto a = tokens(16, 1), b = tokens(16, 2);
  void* block = pool->allocate();
  auto in = c.insert(kNoPrefixEntry, a, block);
  ASSERT_TRUE(in.created);
  EXPECT_EQ(c.match(a, 1).size(), 1u);
  EXPECT_TRUE(c.match(b, 1).empty());  // same key, other tokens: a miss
  void* other = pool->allocate();
  EXPECT_EQ(c.insert(kNoPrefixEntry, b, other).id, kNoPrefixEntry);  // refused, nothing changes
  EXPECT_EQ(c.entries(), 1);
  // A child of a's block whose key collides with a itself is refused too (its parent differs).
  EXPECT_EQ(c.insert(in.id, a, other).id, kNoPrefixEntry);
  pool->release(other);
  c.release(std::span(&in.id, 1));
}

TEST(PrefixCacheIndex, EvictsUnheldLeavesLeastRecentlyUsedFirst) {
  auto pool = test_pool();
  PrefixCache c(pool, nullptr);
  const auto a = tokens(48, 1), b = tokens(32, 2);
  auto ia = insert_chain(c, *pool, a);  // 3 entries
  auto ib = insert_chain(c, *pool, b);  // 2 entries
  EXPECT_EQ(c.blocks(), 5);
  EXPECT_EQ(c.reclaimable_blocks(), 0);
  EXPECT_FALSE(c.evict_one());  // everything held
  c.release(ia);                // a released first: older
  c.release(ib);
  EXPECT_EQ(c.reclaimable_blocks(), 5);
  EXPECT_EQ(c.held_blocks(), 0);
  // a's chain goes first, from its leaf; b stays whole meanwhile.
  ASSERT_TRUE(c.evict_one());
  EXPECT_EQ(c.match(a, 10).size(), 2u);
  EXPECT_EQ(c.match(b, 10).size(), 2u);
  ASSERT_TRUE(c.evict_one());
  ASSERT_TRUE(c.evict_one());
  EXPECT_EQ(c.match(a, 10).size(), 0u);
  EXPECT_EQ(c.match(b, 10).size(), 2u);
  // Using b again makes it recent; a new chain released later is evicted after it... and a held one never.
  auto ib2 = c.match(b, 10);
  c.acquire(ib2);
  EXPECT_EQ(c.reclaimable_blocks(), 0);
  EXPECT_FALSE(c.evict_one());
  c.release(ib2);
  EXPECT_EQ(pool->blocks_in_use(), 2);
  while (c.evict_one()) {
  }
  EXPECT_EQ(c.blocks(), 0);
  EXPECT_EQ(pool->blocks_in_use(), 0);  // every block back in the pool
}

TEST(PrefixCacheIndex, SnapshotsAreEvictableWhileTheirEntryIsHeld) {
  auto pool = test_pool();
  PrefixCache c(pool, nullptr);
  auto ids = insert_chain(c, *pool, tokens(64, 3));
  c.set_snapshot(ids.back(), {pool->allocate(), pool->allocate()});
  EXPECT_EQ(c.blocks(), 6);
  EXPECT_EQ(c.reclaimable_blocks(), 2);
  ASSERT_TRUE(c.evict_one());
  EXPECT_TRUE(c.snapshot(ids.back()).empty());
  EXPECT_EQ(c.match(tokens(64, 3), 10).size(), 4u);  // the KV stays
  EXPECT_EQ(pool->blocks_in_use(), 4);
  EXPECT_FALSE(c.evict_one());
  c.release(ids);
}

// The property eviction must keep: a block in use is never given back to the pool. Held entries' blocks
// are filled with a pattern; everything evictable is evicted and the pool's free blocks are all taken
// and poisoned; the held blocks must keep their pattern and never be handed out.
TEST(PrefixCacheIndex, EvictionNeverFreesABlockInUse) {
  auto pool = test_pool();
  PrefixCache c(pool, nullptr);
  std::vector<std::vector<PrefixEntryId>> held, released;
  for (int i = 0; i < 8; ++i) {
    auto chain = insert_chain(c, *pool, tokens(16 * (1 + i % 3), 10 + i));
    (i % 2 ? held : released).push_back(chain);
  }
  // A held sequence that shares a released one's first block: the shared parent stays.
  auto shared = insert_chain(c, *pool, tokens(16 * 3, 11));  // extends held[0]'s chain (salt 11)
  held.push_back(shared);
  const size_t bb = pool->block_bytes();
  std::set<void*> in_use;
  for (const auto& chain : held)
    for (PrefixEntryId id : chain) {
      in_use.insert(c.target_block(id));
      std::memset(c.target_block(id), 0x5A, bb);
    }
  for (const auto& chain : released) c.release(chain);
  while (c.evict_one()) {
  }
  EXPECT_EQ(c.held_blocks(), static_cast<int64_t>(in_use.size()));
  EXPECT_EQ(pool->blocks_in_use(), static_cast<int64_t>(in_use.size()));
  std::vector<void*> taken;
  for (int64_t i = pool->blocks_allocated() - pool->blocks_in_use(); i > 0; --i) {
    void* b = pool->allocate();
    EXPECT_EQ(in_use.count(b), 0u) << "a held block was handed out again";
    std::memset(b, 0xEE, bb);
    taken.push_back(b);
  }
  for (void* b : in_use) {
    const auto* p = static_cast<const unsigned char*>(b);
    EXPECT_TRUE(std::all_of(p, p + bb, [](unsigned char x) { return x == 0x5A; })) << "a held block was overwritten";
  }
  for (void* b : taken) pool->release(b);
  for (const auto& chain : held) c.release(chain);
}

// ---- the engine: cache on against cache off ----------------------------------------------------------

EngineOptions cache_options(const TinyModel& m, bool cache, int64_t kv_blocks = 4096) {
  EngineOptions o;
  o.max_seqs = 8;
  o.max_queue = 64;
  o.prefill_chunk = 128;
  o.max_batch_rows = 256;
  o.kv_blocks = kv_blocks;
  o.real_vocab = m.tokenizer.id_limit();
  o.prefix_cache = cache;
  o.prefix_cache_state_interval = 64;
  return o;
}

struct CacheCase {
  std::string family;
  float temperature;
};
void PrintTo(const CacheCase& c, std::ostream* os) { *os << c.family << " T=" << c.temperature; }

class PrefixCacheEngine : public ::testing::TestWithParam<CacheCase> {
 protected:
  bool hybrid() const { return GetParam().family == "qwen3_5"; }
  GenerationRequest request(std::vector<int32_t> prompt, int64_t max_tokens, uint64_t seed) const {
    return with_logprobs(make_request(std::move(prompt), max_tokens, GetParam().temperature, seed));
  }
};

TEST_P(PrefixCacheEngine, SharedSystemPromptSequentialAndConcurrent) {
  TinyModel m(GetParam().family);
  const int32_t limit = m.tokenizer.id_limit();
  const auto system = prompt_of(150, 77, limit);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(concat(system, prompt_of(10 + 7 * i, 300 + i, limit)), 12, 9 + i));
  Engine off(*m.model, cache_options(m, false), m.token_text());
  const auto expected = run_sequentially(off, reqs);
  {
    Engine on(*m.model, cache_options(m, true), m.token_text());
    const auto got = run_sequentially(on, reqs);
    expect_same_outputs(got, expected);
    // Dense: every whole block of the shared 150 tokens (144); hybrid: its last snapshot point (128,
    // with a state interval of 64).
    const int64_t hit = hybrid() ? 128 : 144;
    EXPECT_EQ(got[0].cached, 0);
    for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i].cached, hit) << "request " << i;
    EXPECT_EQ(on.metrics().prefix_cache_hits.load(), hit * 5);
    int64_t prompts = 0;
    for (const auto& r : reqs) prompts += static_cast<int64_t>(r.prompt.size());
    EXPECT_EQ(on.metrics().prefix_cache_queries.load(), prompts);
    expect_pool_is_the_cache(*m.model, on);
    // Concurrently now, on the warm cache: the same outputs again.
    expect_same_outputs(run_together(on, reqs), expected);
    expect_pool_is_the_cache(*m.model, on);
  }
  {
    // Concurrently on a cold cache: the first admitted ones miss, those admitted after a chunk hit.
    Engine on(*m.model, cache_options(m, true), m.token_text());
    expect_same_outputs(run_together(on, reqs), expected);
    expect_pool_is_the_cache(*m.model, on);
  }
}

TEST_P(PrefixCacheEngine, MultiTurnConversationResumesAtTheLastTurnsPrompt) {
  TinyModel m(GetParam().family);
  const int32_t limit = m.tokenizer.id_limit();
  Engine off(*m.model, cache_options(m, false), m.token_text());
  EngineOptions o = cache_options(m, true);
  o.prefix_cache_state_interval = 2048;  // only each prompt's last grid point is kept
  Engine on(*m.model, o, m.token_text());
  // 300 tokens and more: each prompt's last grid point (256, 320) is past kMinLastStop, so it is kept.
  std::vector<int32_t> history = prompt_of(300, 5, limit);
  int64_t last_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const GenerationRequest r = request(history, 20, 31 + turn);
    const CacheRun a = collect_run(*off.submit(r)), b = collect_run(*on.submit(r));
    EXPECT_EQ(b.tokens, a.tokens) << "turn " << turn;
    EXPECT_EQ(b.logprobs, a.logprobs) << "turn " << turn;
    // Only the previous prompt's positions were computed by prefill (its answer was decoded): dense hits
    // end at its last whole block (288, 336), hybrid ones at its last multiple of 64 (256, 320).
    const int64_t expect_hit = turn == 0 ? 0 : hybrid() ? (last_prompt - 1) / 64 * 64 : last_prompt / 16 * 16;
    EXPECT_EQ(b.cached, expect_hit) << "turn " << turn;
    last_prompt = static_cast<int64_t>(history.size());
    history = concat(concat(history, a.tokens), prompt_of(30, 60 + turn, limit));
  }
  expect_pool_is_the_cache(*m.model, on);
}

// A shared system prompt whose end is not a snapshot point (interval 2048: only each prompt's last grid
// point and branch points): the first request's snapshot lies past the shared part (at 256 of its 300), so the
// second matches the shared blocks (192 positions) with no snapshot in them and misses on a hybrid target —
// but keeps its state at that branch point, so from the third request on they hit at 192. Dense targets hit
// the shared blocks from the second request on. Outputs equal the cache-off engine's.
TEST_P(PrefixCacheEngine, AHybridPromptKeepsItsStateWhereItLeavesACachedPrefix) {
  TinyModel m(GetParam().family);
  const int32_t limit = m.tokenizer.id_limit();
  const auto system = prompt_of(200, 78, limit);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(concat(system, prompt_of(100, 400 + i, limit)), 8, 5 + i));
  Engine off(*m.model, cache_options(m, false), m.token_text());
  EngineOptions o = cache_options(m, true);
  o.prefix_cache_state_interval = 2048;
  Engine on(*m.model, o, m.token_text());
  const auto expected = run_sequentially(off, reqs);
  const auto got = run_sequentially(on, reqs);
  expect_same_outputs(got, expected);
  const std::vector<int64_t> hits =
      hybrid() ? std::vector<int64_t>{0, 0, 192, 192} : std::vector<int64_t>{0, 192, 192, 192};
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].cached, hits[i]) << "request " << i;
  expect_pool_is_the_cache(*m.model, on);
}

TEST_P(PrefixCacheEngine, AFullyCachedPromptStillPrefillsItsLastToken) {
  TinyModel m(GetParam().family);
  const int32_t limit = m.tokenizer.id_limit();
  Engine off(*m.model, cache_options(m, false), m.token_text());
  Engine on(*m.model, cache_options(m, true), m.token_text());
  for (int n : {64, 65, 128}) {
    const GenerationRequest r = request(prompt_of(n, n, limit), 10, 3);
    const CacheRun a = collect_run(*off.submit(r));
    const CacheRun first = collect_run(*on.submit(r));
    const CacheRun second = collect_run(*on.submit(r));
    EXPECT_EQ(first.tokens, a.tokens);
    EXPECT_EQ(second.tokens, a.tokens) << n;
    EXPECT_EQ(second.logprobs, a.logprobs) << n;
    // At most n - 1 positions come from the cache.
    const int64_t expect_hit = hybrid() ? (n - 1) / 64 * 64 : (n - 1) / 16 * 16;
    EXPECT_EQ(second.cached, expect_hit) << n;
  }
}

TEST_P(PrefixCacheEngine, CacheAndPreemptionBySwapUnderASmallBudget) {
  TinyModel m(GetParam().family);
  const int32_t limit = m.tokenizer.id_limit();
  const auto system = prompt_of(70, 12, limit);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 16; ++i)
    reqs.push_back(request(concat(i % 4 ? system : prompt_of(40, 90 + i, limit), prompt_of(5 + 3 * i, 400 + i, limit)),
                           30, 70 + i));
  Engine off(*m.model, cache_options(m, false), m.token_text());
  const auto expected = run_sequentially(off, reqs);
  EngineOptions o = cache_options(m, true, 24);  // the longest request needs 9 blocks; all of them ~140
  o.max_seqs = 32;
  o.prefill_chunk = 64;
  o.max_batch_rows = 160;
  Engine on(*m.model, o, m.token_text());
  // Warm the cache with the system prompt, then everything at once.
  collect_run(*on.submit(reqs[1]));
  const auto got = run_together(on, reqs);
  expect_same_outputs(got, expected);
  EXPECT_GT(on.metrics().preemptions.load(), 0u);
  EXPECT_GT(on.metrics().prefix_cache_hits.load(), 0);
  EXPECT_LE(on.metrics().prefix_cache_blocks.load(), 24);
  expect_pool_is_the_cache(*m.model, on);
}

TEST_P(PrefixCacheEngine, EvictionUnderPressureKeepsOutputsExact) {
  TinyModel m(GetParam().family);
  const int32_t limit = m.tokenizer.id_limit();
  // 12 distinct 100-token prompts through a 40-block budget: the cache fills and evicts.
  Engine off(*m.model, cache_options(m, false), m.token_text());
  Engine on(*m.model, cache_options(m, true, 40), m.token_text());
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(request(prompt_of(100, 500 + i % 6, limit), 8, 20 + i));
  expect_same_outputs(run_sequentially(on, reqs), run_sequentially(off, reqs));
  expect_pool_is_the_cache(*m.model, on);
  EXPECT_LE(on.metrics().prefix_cache_blocks.load(), 40);
  // And concurrently (cached blocks held by running sequences are never evicted under them).
  expect_same_outputs(run_together(on, reqs), run_sequentially(off, reqs));
  expect_pool_is_the_cache(*m.model, on);
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefixCacheEngine,
                         ::testing::Values(CacheCase{"qwen3", 0.0f}, CacheCase{"qwen3_5", 0.0f},
                                           CacheCase{"qwen3", 0.9f}, CacheCase{"qwen3_5", 0.9f}),
                         [](const auto& info) {
                           return info.param.family + (info.param.temperature > 0 ? "_seeded" : "_greedy");
                         });

// The last-stop cut on a hybrid target (engine/prefix_share.cpp, kMinLastStop = 256): a prompt whose last
// grid point is under 256 is prefilled in one chunk and keeps no state there, so the next request that
// extends it misses; a longer one still stops at its last grid point (640 of 700), keeps the state there,
// and the next request that extends it resumes from it. Outputs equal the cache-off engine's.
TEST(PrefixCacheEngineHybrid, OnlyAPromptPastTwoHundredFiftySixIsCutAtItsLastGridPoint) {
  TinyModel m("qwen3_5");
  ASSERT_GT(m.model->snapshot_blocks(), 0);
  const int32_t limit = m.tokenizer.id_limit();
  auto options = [&](bool cache) {
    EngineOptions o = cache_options(m, cache);
    o.prefix_cache_state_interval = 2048;  // no interval stop under 2048: only the last stop can cut
    o.prefill_chunk = 1024;                // nor a chunk boundary
    o.max_batch_rows = 1024;
    return o;
  };
  Engine off(*m.model, options(false), m.token_text());
  struct Case {
    int prompt;
    uint64_t first_steps;  // forwards for the first request's prompt (one token: no decode step)
    int64_t resumed;       // the extending request's hit
  };
  for (const Case c : {Case{128, 1, 0}, Case{200, 1, 0}, Case{700, 2, 640}}) {
    Engine on(*m.model, options(true), m.token_text());
    const auto prompt = prompt_of(c.prompt, c.prompt, limit);
    const GenerationRequest first = with_logprobs(make_request(prompt, 1));
    const CacheRun a = collect_run(*on.submit(first));
    EXPECT_EQ(a.tokens, collect_run(*off.submit(first)).tokens) << c.prompt;
    ASSERT_TRUE(wait_for_idle(on));
    EXPECT_EQ(on.metrics().steps.load(), c.first_steps) << c.prompt;
    const GenerationRequest next = with_logprobs(make_request(concat(prompt, prompt_of(50, 7, limit)), 8));
    const CacheRun want = collect_run(*off.submit(next)), got = collect_run(*on.submit(next));
    EXPECT_EQ(got.tokens, want.tokens) << c.prompt;
    EXPECT_EQ(got.logprobs, want.logprobs) << c.prompt;
    EXPECT_EQ(got.cached, c.resumed) << c.prompt;
    expect_pool_is_the_cache(*m.model, on);
  }
}

// A dense hit at a multiple of 16 that is not one of 64 (the chunk after it starts off the 64-grid).
TEST(PrefixCacheEngineDense, AHitOffTheSixtyFourGridIsExact) {
  TinyModel m("qwen3");
  const int32_t limit = m.tokenizer.id_limit();
  const auto shared = prompt_of(48, 8, limit);
  Engine off(*m.model, cache_options(m, false), m.token_text());
  Engine on(*m.model, cache_options(m, true), m.token_text());
  for (int i = 0; i < 3; ++i) {
    const GenerationRequest r = with_logprobs(make_request(concat(shared, prompt_of(90, 40 + i, limit)), 16));
    const CacheRun a = collect_run(*off.submit(r)), b = collect_run(*on.submit(r));
    EXPECT_EQ(b.tokens, a.tokens);
    EXPECT_EQ(b.logprobs, a.logprobs);
    EXPECT_EQ(b.cached, i == 0 ? 0 : 48);
  }
}

// Off means off: no hits, nothing kept.
TEST(PrefixCacheEngineDense, OffKeepsNothing) {
  TinyModel m("qwen3");
  Engine off(*m.model, cache_options(m, false), m.token_text());
  const auto p = prompt_of(80, 1, m.tokenizer.id_limit());
  collect_run(*off.submit(make_request(p, 4)));
  EXPECT_EQ(collect_run(*off.submit(make_request(p, 4))).cached, 0);
  ASSERT_TRUE(wait_for_idle(off));
  EXPECT_EQ(off.metrics().prefix_cache_queries.load(), 0);
  EXPECT_EQ(m.model->kv_pool()->blocks_in_use(), 0);
}

}  // namespace

namespace {

// A DeltaNet snapshot carries the state a hybrid hit needs: a sequence started from another's blocks and
// snapshot at 64 gives the same logits bit for bit for the next prompt token; without the snapshot it
// does not (so the engine tests above would see a missing restore).
TEST(PrefixCacheSnapshot, RestoresTheStateAHybridHitNeeds) {
  TinyModel m("qwen3_5");
  TargetModel& model = *m.model;
  ASSERT_GT(model.snapshot_blocks(), 0);
  const auto prompt = prompt_of(65, 4, m.tokenizer.id_limit());
  auto logits_of = [&](SequenceState& s, std::span<const int32_t> tokens) {
    ForwardBatch b;
    b.spans = {{&s, tokens, SpanMode::Prefill, LogitsWanted::Last}};
    ForwardResult r = model.forward(b);
    return std::vector<float>(r.logits.as<float>(), r.logits.as<float>() + r.logits.shape().numel());
  };
  auto a = model.new_sequence();
  logits_of(*a, std::span(prompt).first(64));
  std::vector<void*> snapshot;
  for (int64_t i = 0; i < model.snapshot_blocks(); ++i) snapshot.push_back(model.kv_pool()->allocate());
  model.save_snapshot(*a, snapshot);
  std::vector<void*> blocks;
  for (int64_t i = 0; i < 4; ++i) blocks.push_back(a->kv_block(i));
  auto with = model.new_sequence();
  with->adopt_prefix(blocks, 64);
  model.restore_snapshot(snapshot, *with);
  auto without = model.new_sequence();
  without->adopt_prefix(blocks, 64);
  const auto last = std::span(prompt).subspan(64);
  const auto expected = logits_of(*a, last);
  EXPECT_EQ(logits_of(*with, last), expected);
  EXPECT_NE(logits_of(*without, last), expected);
  EXPECT_EQ(with->private_blocks(), 1);  // the 65th position's block; the 4 shared ones are a's
  for (void* b : snapshot) model.kv_pool()->release(b);
}

}  // namespace
