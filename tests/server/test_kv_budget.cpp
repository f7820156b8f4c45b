// kv_budget_blocks: the serving KV budget from what one block and one sequence cost and from the
// memory left after the weights (host RAM share, or the device's free memory minus the DeltaNet state
// of max_seqs sequences and an activation headroom).
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/model_config.h"
#include "server/loaded_model.h"

namespace specserve::server {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

ModelConfig config_with_context(int64_t ctx) {
  ModelConfig c;
  c.max_position_embeddings = ctx;
  return c;
}

ServeSpec spec_with(int max_seqs, int64_t kv_mib = 0) {
  ServeSpec s;
  s.engine.max_seqs = max_seqs;
  s.kv_cache_mib = kv_mib;
  return s;
}

TEST(KvBudget, ExplicitMibWins) {
  KvSizing z{1 << 20, 0, true, 0};
  EXPECT_EQ(kv_budget_blocks(config_with_context(4096), spec_with(4, 64), z), 64);
}

TEST(KvBudget, FullContextsWhenTheyFit) {
  KvSizing z{1 << 20, 0, true, 100 * kGiB};
  // 4 sequences × 4096 positions = 1024 blocks of 1 MiB: far under 100 GiB.
  EXPECT_EQ(kv_budget_blocks(config_with_context(4096), spec_with(4), z), 4 * 4096 / 16);
}

TEST(KvBudget, DeviceCapLeavesStateAndHeadroom) {
  // 20 GiB free, 8 sequences of 1 GiB DeltaNet state, 1 GiB + 5 % headroom → 10 GiB of 1 MiB blocks.
  KvSizing z{1 << 20, kGiB, true, 20 * kGiB};
  EXPECT_EQ(kv_budget_blocks(config_with_context(1 << 20), spec_with(8), z), 10 * 1024);
}

TEST(KvBudget, HostUsesAQuarterOfTheRam) {
  KvSizing z{1 << 20, kGiB, false, 64 * kGiB};
  EXPECT_EQ(kv_budget_blocks(config_with_context(1 << 20), spec_with(8), z), 16 * 1024);
}

TEST(KvBudget, NoRoomOnTheDeviceIsAClearError) {
  KvSizing z{1 << 20, 4 * kGiB, true, 6 * kGiB};
  try {
    kv_budget_blocks(config_with_context(4096), spec_with(16), z);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-seqs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specserve::server
