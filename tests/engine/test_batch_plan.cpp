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
