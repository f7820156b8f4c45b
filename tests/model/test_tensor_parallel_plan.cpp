// The tensor-parallel partition (docs/DESIGN.md §6.1): the Qwen3-8B and Qwen3.6-27B tables at N = 1, 2, 4, 8,
// the KV-head replication rule, and the shapes that are refused with the config key named; `specserve info
// --model DIR --tensor-parallel N` prints the table (text and JSON) or the refusal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "../specserve_cli.h"
#include "core/error.h"
#include "model/synthetic_shapes.h"
#include "model/tensor_parallel_plan.h"

namespace specserve {
namespace {

// Every rank's ranges tile [0, total) in rank order.
template <class Get>
void expect_tiles(const TensorParallelPlan& p, int64_t total, Get get, const char* what) {
  int64_t at = 0;
  for (const RankShare& s : p.shares) {
    const IndexRange r = get(s);
    EXPECT_EQ(r.begin, at) << what;
    EXPECT_GT(r.size(), 0) << what;
    at = r.end;
  }
  EXPECT_EQ(at, total) << what;
}

TEST(TensorParallelPlan, Qwen3_8bTable) {
  const ModelConfig cfg = synthetic_shape("qwen3-8b").target;  // 32 / 8 heads, I 12288, V 151936
  for (int n : {1, 2, 4, 8}) {
    const TensorParallelPlan p = plan_tensor_parallel(cfg, n);
    ASSERT_EQ(p.ranks, n);
    ASSERT_EQ(p.shares.size(), static_cast<size_t>(n));
    EXPECT_EQ(p.kv_replicas, 1);
    expect_tiles(
        p, 32, [](const RankShare& s) { return s.q_heads; }, "q heads");
    expect_tiles(
        p, 8, [](const RankShare& s) { return s.kv_heads; }, "kv heads");
    expect_tiles(
        p, 12288, [](const RankShare& s) { return s.mlp_columns; }, "mlp");
    expect_tiles(
        p, 151936, [](const RankShare& s) { return s.vocab_rows; }, "vocab");
    for (const RankShare& s : p.shares) {
      EXPECT_EQ(s.q_heads.size(), 32 / n);
      EXPECT_EQ(s.gdn_k_heads.size(), 0);  // dense: no DeltaNet
      EXPECT_EQ(s.gdn_v_heads.size(), 0);
    }
  }
  const TensorParallelPlan p2 = plan_tensor_parallel(cfg, 2);
  EXPECT_EQ(p2.shares[1].q_heads, (IndexRange{16, 32}));
  EXPECT_EQ(p2.shares[1].kv_heads, (IndexRange{4, 8}));
  EXPECT_EQ(p2.shares[1].mlp_columns, (IndexRange{6144, 12288}));
  EXPECT_EQ(p2.shares[1].vocab_rows, (IndexRange{75968, 151936}));
  // 16 ranks: 2 query heads each, 8 KV heads each held by 2 ranks.
  const TensorParallelPlan p16 = plan_tensor_parallel(cfg, 16);
  EXPECT_EQ(p16.kv_replicas, 2);
  EXPECT_EQ(p16.shares[5].q_heads, (IndexRange{10, 12}));
  EXPECT_EQ(p16.shares[5].kv_heads, (IndexRange{2, 3}));  // query heads 10, 11 read KV head 10 / 4 = 2
}

TEST(TensorParallelPlan, Qwen3_6_27bTable) {
  // 24 / 4 heads, DeltaNet 16 key / 48 value heads, I 17408, V 248320.
  const ModelConfig cfg = synthetic_shape("qwen3.6-27b").target;
  for (int n : {1, 2, 4, 8}) {
    const TensorParallelPlan p = plan_tensor_parallel(cfg, n);
    expect_tiles(
        p, 24, [](const RankShare& s) { return s.q_heads; }, "q heads");
    expect_tiles(
        p, 16, [](const RankShare& s) { return s.gdn_k_heads; }, "deltanet k heads");
    expect_tiles(
        p, 48, [](const RankShare& s) { return s.gdn_v_heads; }, "deltanet v heads");
    expect_tiles(
        p, 17408, [](const RankShare& s) { return s.mlp_columns; }, "mlp");
    expect_tiles(
        p, 248320, [](const RankShare& s) { return s.vocab_rows; }, "vocab");
    EXPECT_EQ(p.kv_replicas, n == 8 ? 2 : 1);
    if (n <= 4)
      expect_tiles(
          p, 4, [](const RankShare& s) { return s.kv_heads; }, "kv heads");
    for (const RankShare& s : p.shares) {
      // A rank's value heads read exactly its key heads (value head h reads key head h / 3).
      EXPECT_EQ(s.gdn_v_heads.begin, 3 * s.gdn_k_heads.begin);
      EXPECT_EQ(s.gdn_v_heads.end, 3 * s.gdn_k_heads.end);
      // Its query heads all read KV heads it holds (query head h reads KV head h / 6).
      EXPECT_GE(s.q_heads.begin / 6, s.kv_heads.begin);
      EXPECT_LT((s.q_heads.end - 1) / 6, s.kv_heads.end);
    }
  }
  // 8 ranks: 3 query heads each; KV head k on ranks 2k and 2k + 1.
  const TensorParallelPlan p8 = plan_tensor_parallel(cfg, 8);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(p8.shares[r].q_heads, (IndexRange{3 * r, 3 * r + 3}));
    EXPECT_EQ(p8.shares[r].kv_heads, (IndexRange{r / 2, r / 2 + 1}));
  }
  EXPECT_NE(p8.describe().find("rank 7: q heads [21, 24) kv heads [3, 4) (replicated)"), std::string::npos)
      << p8.describe();
}

TEST(TensorParallelPlan, UnevenVocabularySplitsByAtMostOneRow) {
  ModelConfig cfg = synthetic_shape("qwen3-8b").target;
  cfg.vocab_size = 10;
  const TensorParallelPlan p = plan_tensor_parallel(cfg, 4);
  expect_tiles(
      p, 10, [](const RankShare& s) { return s.vocab_rows; }, "vocab");
  for (const RankShare& s : p.shares) EXPECT_TRUE(s.vocab_rows.size() == 2 || s.vocab_rows.size() == 3);
}

void expect_refused(const ModelConfig& cfg, int n, const std::string& key) {
  try {
    plan_tensor_parallel(cfg, n);
    ADD_FAILURE() << "N = " << n << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(TensorParallelPlan, RefusesShapesThatDoNotDivide) {
  const ModelConfig dense = synthetic_shape("qwen3-8b").target, hybrid = synthetic_shape("qwen3.6-27b").target;
  expect_refused(dense, 3, "num_attention_heads");
  expect_refused(hybrid, 16, "num_attention_heads");  // 24 heads
  expect_refused(hybrid, 3, "num_key_value_heads");   // 4 KV heads: neither 4 % 3 nor 3 % 4
  expect_refused(dense, 0, "--tensor-parallel must be");
  expect_refused(dense, 65, "--tensor-parallel must be");
  ModelConfig c = dense;
  c.intermediate_size = 12290;
  expect_refused(c, 4, "intermediate_size");
  c = hybrid;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  expect_refused(c, 32, "linear_num_key_heads");  // 16 DeltaNet key heads are never replicated
  c = hybrid;
  c.linear_num_value_heads = 36;
  c.linear_num_key_heads = 12;
  expect_refused(c, 8, "linear_num_key_heads");
  c = dense;
  c.vocab_size = 3;
  expect_refused(c, 4, "vocab_size");
}

std::string demo_target_dir() {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  return (env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR)) + "/models/demo-coder/target";
}

TEST(TensorParallelPlan, InfoShowsThePartitionOrWhyNot) {
  using testing::run_specserve;
  const std::string model = "info --model " + demo_target_dir();
  const auto text = run_specserve(model + " --tensor-parallel 2");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("tensor parallel over 2 ranks"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("rank 1: q heads [2, 4) kv heads [1, 2)"), std::string::npos) << text.out;  // 4 / 2 heads
  const auto json = run_specserve(model + " --tensor-parallel 2 --json");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out)["tensor_parallel"];
  EXPECT_EQ(j["ranks"], 2);
  ASSERT_EQ(j["shares"].size(), 2u);
  EXPECT_EQ(j["shares"][1]["deltanet_v_heads"], nlohmann::json::array({4, 8}));  // 8 DeltaNet value heads
  EXPECT_EQ(j["shares"][1]["vocab_rows"], nlohmann::json::array({4096, 8192}));
  EXPECT_NE(run_specserve(model + " --tensor-parallel 3").status, 0);  // 2 KV heads do not split 3 ways
  EXPECT_EQ(run_specserve(model).out.find("tensor parallel"), std::string::npos);
}

}  // namespace
}  // namespace specserve
