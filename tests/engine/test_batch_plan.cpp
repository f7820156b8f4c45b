// The scheduler's row plan: decode/verify rows first, prefill chunks oldest first within the row
// budget, and chunk boundaries that depend only on the sequence.
#include <gtest/gtest.h>

#include <random>

#include "engine/batch_plan.h"
#include "engine/engine_options.h"
#include "engine/kv_budget.h"

using namespace specserve::engine;

TEST(BatchPlan, DecodeRowsFirstThenChunksInOrder) {
  EngineOptions o;
  o.prefill_chunk = 64;
  o.max_batch_rows = 160;
  std::vector<SeqPlanInput> seqs = {{100, 0, 0}, {10, 10, 0}, {300, 64, 0}, {50, 50, 3}, {70, 0, 0}};
  auto plan = plan_step(seqs, o);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].kind, SpanKind::Decode);
  EXPECT_EQ(plan[0].seq, 1u);
  EXPECT_EQ(plan[0].rows, 1);
  EXPECT_EQ(plan[1].seq, 3u);
  EXPECT_EQ(plan[1].rows, 4);  // verify: pending + 3 drafts
  EXPECT_EQ(plan[2].kind, SpanKind::PrefillChunk);
  EXPECT_EQ(plan[2].seq, 0u);
  EXPECT_EQ(plan[2].begin, 0);
  EXPECT_EQ(plan[2].end, 64);
  EXPECT_FALSE(plan[2].final_chunk);
  EXPECT_EQ(plan[3].seq, 2u);
  EXPECT_EQ(plan[3].begin, 64);
  EXPECT_EQ(plan[3].end, 128);
  // Seq 4's chunk (64 rows) no longer fits in 160 - 5 - 128; it waits whole, never shortened.
}

TEST(BatchPlan, LaterPromptsDoNotOvertake) {
  EngineOptions o;
  o.prefill_chunk = 64;
  o.max_batch_rows = 100;
  std::vector<SeqPlanInput> seqs = {{64, 0, 0}, {64, 0, 0}, {10, 0, 0}};
  auto plan = plan_step(seqs, o);
  ASSERT_EQ(plan.size(), 1u);  // the 10-token prompt would fit but must not overtake the second
  EXPECT_EQ(plan[0].seq, 0u);
  EXPECT_TRUE(plan[0].final_chunk);
}

TEST(BatchPlan, ChunkBoundariesDependOnlyOnTheSequence) {
  EngineOptions o;
  o.prefill_chunk = 64;
  o.max_batch_rows = 256;
  std::mt19937 rng(7);
  // Random mixes: every chunk a sequence gets is [k·64, min((k+1)·64, n)).
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<SeqPlanInput> seqs;
    int n = 1 + rng() % 12;
    for (int i = 0; i < n; ++i) {
      int64_t len = 1 + rng() % 400;
      int64_t done = (rng() % 2) ? len : std::min<int64_t>(len, (rng() % 8) * 64);
      seqs.push_back({len, done, static_cast<int>(rng() % 4)});
    }
    int64_t rows = 0;
    for (const auto& s : plan_step(seqs, o)) {
      rows += s.rows;
      if (s.kind != SpanKind::PrefillChunk) continue;
      EXPECT_EQ(s.begin % 64, 0);
      EXPECT_EQ(s.end, std::min<int64_t>(s.begin + 64, seqs[s.seq].prompt_len));
      EXPECT_EQ(s.final_chunk, s.end == seqs[s.seq].prompt_len);
    }
    EXPECT_LE(rows, o.max_batch_rows);
  }
}

TEST(EngineOptions, NormalisedAlwaysLeavesRoomForAChunk) {
  EngineOptions o;
  o.max_seqs = 16;
  o.gamma = 15;
  o.max_batch_rows = 100;  // smaller than the verify rows alone
  o.prefill_chunk = 100;
  EngineOptions n = normalised(o);
  EXPECT_EQ(n.prefill_chunk % 64, 0);
  EXPECT_GE(n.max_batch_rows, 16 * 16 + n.prefill_chunk);
  o.max_batch_rows = 1024;
  o.prefill_chunk = 512;
  n = normalised(o);
  EXPECT_EQ(n.prefill_chunk, 512);  // 1024 - 256 = 768 >= 512: unchanged
  o.prefill_chunk = 1000;
  n = normalised(o);
  EXPECT_EQ(n.prefill_chunk, 768);  // shrunk to the room left, a multiple of 64
  EXPECT_EQ(n.max_batch_rows, 1024);
}

// The swap space's reservation (engine/kv_budget.h): entries in the device-safe prefix cost nothing
// unless swapped out; every entry after it costs its worst-case image.
TEST(KvBudget, SwapReservationCoversEverySequenceOutsideTheSafePrefix) {
  EXPECT_EQ(blocks_for(0), 0);
  EXPECT_EQ(blocks_for(1), 1);
  EXPECT_EQ(blocks_for(16), 1);
  EXPECT_EQ(blocks_for(17), 2);
  std::vector<BudgetEntry> live = {{4, 100, false, 0}, {4, 200, true, 50}, {4, 300, false, 0}, {1, 400, true, 7}};
  // 10 blocks: the first two fit (8), the third does not, and the prefix ends there (the fourth, though
  // small, is after it).
  EXPECT_EQ(swap_reservation(live, 10), 50u + 300u + 400u);
  EXPECT_EQ(swap_reservation(live, 13), 50u + 7u);
  EXPECT_EQ(swap_reservation(live, 3), 100u + 200u + 300u + 400u);
  EXPECT_EQ(swap_reservation({}, 3), 0u);
}

// The prefill hold (hold_prefill): short chunks beside decode rows wait while another prompt is expected.
namespace {
int prefill_spans(const std::vector<PlannedSpan>& plan) {
  int n = 0;
  for (const auto& s : plan) n += s.kind == SpanKind::PrefillChunk;
  return n;
}
}  // namespace

TEST(BatchPlan, PrefillHoldKeepsAShortPromptBackWhileAnotherIsExpected) {
  EngineOptions o;
  o.prefill_chunk = 2048;
  o.max_batch_rows = 4096;
  o.prefill_hold_steps = 4;
  std::vector<SeqPlanInput> seqs = {{50, 50, 3}, {50, 50, 0}, {128, 0, 0}};
  // One prompt a step expected (×4 steps left): held, the decode rows run.
  auto plan = plan_step(seqs, o, 1.0);
  EXPECT_EQ(plan.size(), 2u);
  EXPECT_EQ(prefill_spans(plan), 0);
  // Off: the same step plans the chunk.
  o.prefill_hold_steps = 0;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 1);
  o.prefill_hold_steps = 4;
  // Too few arrivals for another prompt within the steps left: 0.3 × 3 < 1 after one step of waiting.
  seqs[2].waited = 1;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 0.3)), 1);
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 0.34)), 0);
  // The longest a prompt waits: hold_steps steps.
  seqs[2].waited = 4;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 100.0)), 1);
}

TEST(BatchPlan, ArrivalRateCountsStepsThatAdmittedAPromptNotPrompts) {
  EngineOptions o;
  o.prefill_chunk = 2048;
  o.max_batch_rows = 4096;
  o.prefill_hold_steps = 4;
  o.prefill_hold_rows = 1024;
  // A closed loop's wave: 12 of 16 clients' next prompts admitted in one step, the other 4 a step later, beside the
  // 12 then decoding. The 4 stragglers (512 rows) are not held: no other prompt is coming.
  ArrivalRate rate;
  for (int i = 0; i < 64; ++i) rate.note_step(0);
  rate.note_step(12);
  rate.note_step(4);
  EXPECT_NEAR(rate.per_step(), 1.0 / 16 + (1 - 1.0 / 16) / 16, 1e-12);
  std::vector<SeqPlanInput> seqs;
  for (int i = 0; i < 12; ++i) seqs.push_back({128, 128, 0});
  for (int i = 0; i < 4; ++i) seqs.push_back({128, 0, 0});
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, rate.per_step())), 4);
  // Counted as prompts (the estimator before), the burst predicted ~0.95 a step and held them.
  double counted = 0;
  for (int admitted : {12, 4}) counted += (admitted - counted) / ArrivalRate::kSteps;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, counted)), 0);
  // Prompts arriving one a step, the staggered case the hold is for: held.
  ArrivalRate steady;
  for (int i = 0; i < 32; ++i) steady.note_step(1);
  EXPECT_GT(steady.per_step(), 0.85);
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, steady.per_step())), 0);
  // One every third step: 1/3 x 4 steps left >= 1, held; one every fifth step: not.
  ArrivalRate third, fifth;
  for (int i = 0; i < 300; ++i) third.note_step(i % 3 == 0), fifth.note_step(i % 5 == 0 ? 2 : 0);
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, third.per_step())), 0);
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, fifth.per_step())), 4);
}

TEST(BatchPlan, PrefillHoldReleasesAtItsRowsAndNeverHoldsAStepWithoutDecodeRows) {
  EngineOptions o;
  o.prefill_chunk = 2048;
  o.max_batch_rows = 4096;
  o.prefill_hold_steps = 8;
  o.prefill_hold_rows = 256;
  // Two short prompts together reach prefill_hold_rows: both run.
  std::vector<SeqPlanInput> seqs = {{50, 50, 0}, {128, 0, 0}, {128, 0, 0}};
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 2);
  seqs[2].prompt_len = 127;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 0);
  // A long prompt's chunk is never held; nor is a short one when nothing decodes (the step is its prefill).
  seqs = {{50, 50, 0}, {5000, 0, 0}};
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 1);
  seqs = {{128, 0, 0}, {100, 0, 0}};
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 2);
  // The wait that counts is the longest of the chunks the step would plan.
  seqs = {{50, 50, 0}, {60, 0, 0}, {60, 0, 0}};
  seqs[1].waited = 8;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 2);
  // A larger threshold holds the pair of 128-token prompts too.
  seqs = {{50, 50, 0}, {128, 0, 0}, {128, 0, 0}};
  o.prefill_hold_rows = 1024;
  EXPECT_EQ(prefill_spans(plan_step(seqs, o, 1.0)), 0);
}

TEST(BatchPlan, PrefillHoldNeverChangesAChunksBoundaries) {
  EngineOptions o;
  o.prefill_chunk = 64;
  o.max_batch_rows = 512;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<SeqPlanInput> seqs;
    const int n = 1 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      const int64_t len = 1 + rng() % 300;
      const int64_t done = (rng() % 2) ? len : std::min<int64_t>(len, (rng() % 4) * 64);
      SeqPlanInput q{len, done, static_cast<int>(rng() % 4)};
      q.waited = rng() % 6;
      seqs.push_back(q);
    }
    o.prefill_hold_steps = 0;
    const auto free_plan = plan_step(seqs, o);
    o.prefill_hold_steps = 4;
    const auto held = plan_step(seqs, o, 0.5 + (rng() % 4));
    // The held plan is the free plan, or the free plan without its prefill chunks.
    std::vector<PlannedSpan> expect;
    const bool dropped = prefill_spans(held) == 0 && prefill_spans(free_plan) > 0;
    for (const auto& s : free_plan)
      if (!(dropped && s.kind == SpanKind::PrefillChunk)) expect.push_back(s);
    ASSERT_EQ(held.size(), expect.size()) << "trial " << trial;
    for (size_t i = 0; i < held.size(); ++i) {
      EXPECT_EQ(held[i].seq, expect[i].seq);
      EXPECT_EQ(held[i].begin, expect[i].begin);
      EXPECT_EQ(held[i].end, expect[i].end);
      EXPECT_EQ(held[i].rows, expect[i].rows);
    }
  }
}
