// plan_memory (engine/memory_plan.h): the serving KV budget and, on a GPU with --max-seqs 0, the number
// of sequences, from what one budget block (target + drafter), one sequence's state and its forward rows
// cost and from the memory left after the weights.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/kv_budget.h"
#include "engine/memory_plan.h"

namespace specserve::engine {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

MemoryCosts device(size_t block, size_t state, size_t available) {
  MemoryCosts c;
  c.block_bytes = block;
  c.sequence_bytes = state;
  c.on_device = true;
  c.available_bytes = available;
  return c;
}

// What the device keeps for activations and the allocator: 1 GiB + 5 %.
int64_t usable(size_t available) { return static_cast<int64_t>(available) - (int64_t{1} << 30) - available / 20; }

TEST(MemoryPlan, AutoSequencesFillTheDeviceWithTypicalSequences) {
  // An 8B-like shape: 2.25 MiB per block (target 36 layers of bf16 K/V), no DeltaNet, 120 GiB free.
  const size_t block = 2304 * 1024;
  const MemoryCosts c = device(block, 0, 120 * kGiB);
  const MemoryPlan p = plan_memory(c, 0, 0);
  const int64_t per_typical = blocks_for(kTypicalSequencePositions) * static_cast<int64_t>(block);
  EXPECT_EQ(p.max_seqs, usable(c.available_bytes) / per_typical);
  EXPECT_GE(p.max_seqs, 200);  // "in the hundreds"
  EXPECT_EQ(p.kv_blocks, usable(c.available_bytes) / static_cast<int64_t>(block));
  EXPECT_NE(p.rule.find("auto"), std::string::npos) << p.rule;
}

TEST(MemoryPlan, EverySequenceCostIsCounted) {
  // A hybrid shape: 300 MiB of DeltaNet + drafter state per sequence, 1 MiB blocks, activation rows.
  MemoryCosts c = device(kMiB, 300 * kMiB, 80 * kGiB);
  c.row_bytes = kMiB;
  c.rows_per_sequence = 16;
  const MemoryPlan p = plan_memory(c, 0, 0);
  const int64_t fixed = 316 * static_cast<int64_t>(kMiB);
  const int64_t typical = blocks_for(kTypicalSequencePositions) * static_cast<int64_t>(kMiB);
  EXPECT_EQ(p.max_seqs, usable(c.available_bytes) / (fixed + typical));
  EXPECT_EQ(p.kv_blocks, (usable(c.available_bytes) - fixed * p.max_seqs) / static_cast<int64_t>(kMiB));
  // The states and the KV budget together stay within what is usable.
  EXPECT_LE(fixed * p.max_seqs + p.kv_blocks * static_cast<int64_t>(kMiB), usable(c.available_bytes));
}

TEST(MemoryPlan, ExplicitFlagsWin) {
  const MemoryCosts c = device(kMiB, kGiB, 20 * kGiB);
  MemoryPlan p = plan_memory(c, 8, 0);  // --max-seqs 8: the rest of the device is KV
  EXPECT_EQ(p.max_seqs, 8);
  EXPECT_EQ(p.kv_blocks, (usable(c.available_bytes) - 8 * static_cast<int64_t>(kGiB)) / static_cast<int64_t>(kMiB));
  p = plan_memory(c, 0, 512);  // --kv-cache-mib 512: as many typical sequences as it holds
  EXPECT_EQ(p.kv_blocks, 512);
  EXPECT_EQ(p.max_seqs, 512 / blocks_for(kTypicalSequencePositions));
}

TEST(MemoryPlan, HostKeepsSixteenSequencesAndAQuarterOfTheRam) {
  MemoryCosts c;
  c.block_bytes = kMiB;
  c.available_bytes = 64 * kGiB;
  c.context_positions = 1 << 20;
  const MemoryPlan p = plan_memory(c, 0, 0);
  EXPECT_EQ(p.max_seqs, kHostDefaultSequences);
  EXPECT_EQ(p.kv_blocks, 16 * 1024);
  EXPECT_EQ(plan_memory(c, 4, 64).kv_blocks, 64);
}

TEST(MemoryPlan, NoRoomOnTheDeviceIsAClearError) {
  EXPECT_THROW(plan_memory(device(kMiB, 5 * kGiB, 6 * kGiB), 0, 0), Error);  // not even one sequence
  const MemoryCosts c = device(kMiB, 4 * kGiB, 6 * kGiB);
  try {
    plan_memory(c, 16, 0);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-seqs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specserve::engine
