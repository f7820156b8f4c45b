// `specserve bench steps --synthetic SHAPE`: the step benchmark runs end to end on the tiny synthetic pair
// (CPU here; the real shapes on the GPU machine) and reports every measurement the JSON promises,
// with positive times, byte counts that grow with the batch and a projection per verify batch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../specserve_cli.h"

namespace specserve::testing {
namespace {

TEST(StepBenchCli, SyntheticTinyReportsEveryMeasurement) {
  const CliRun r = run_specserve(
      "bench steps --synthetic tiny --backend cpu --threads 2 --iterations 1 --context 40 --prefill 70 "
      "--decode-batches 1,3 --verify-batches 1,3 --verify-k 2,16 --tau 4.5 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "synthetic tiny");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_GT(j["copy_bandwidth_gb_s"].get<double>(), 0);
  EXPECT_GT(j["step_weight_bytes"].get<double>(), 1e5);
  EXPECT_GT(j["drafter_weight_bytes"].get<double>(), 1e5);
  EXPECT_EQ(j["draft_matmul"], "fast");  // the default drafter order, reported with the numbers
  ASSERT_EQ(j["prefill"].size(), 1u);    // --prefill takes a list (tests/cli/test_step_bench_long.cpp)
  EXPECT_EQ(j["prefill"][0]["tokens"], 70);
  EXPECT_GT(j["prefill"][0]["tokens_per_s"].get<double>(), 0);
  ASSERT_EQ(j["decode"].size(), 2u);
  EXPECT_GT(j["decode"][1]["bytes"].get<double>(), j["decode"][0]["bytes"].get<double>());
  for (const auto& d : j["decode"]) {
    EXPECT_GT(d["ms"].get<double>(), 0);
    EXPECT_GT(d["roofline_fraction"].get<double>(), 0);
    EXPECT_GT(d["host_enqueue_ms"].get<double>(), 0);
  }
  ASSERT_EQ(j["verify"].size(), 4u);  // 2 batches x 2 K
  for (const auto& v : j["verify"]) EXPECT_GT(v["ratio_to_decode"].get<double>(), 0);
  ASSERT_EQ(j["propose"].size(), 2u);
  EXPECT_EQ(j["propose"][0]["appended_rows"], 5);  // ceil(tau)
  ASSERT_EQ(j["projection"].size(), 2u);
  EXPECT_EQ(j["projection"][0]["k"], 16);
  EXPECT_GT(j["projection"][0]["dflash_tokens_per_s"].get<double>(), 0);
}

// --tensor-parallel 2: the sharded target's steps, and the collective alone at each decode batch's shapes
// (2 × layers + 1 all-reduces and one gather) with its share of the step; an unsharded run has no such table.
TEST(StepBenchCli, TensorParallelReportsTheCollectivesShare) {
  const std::string flags =
      "bench steps --synthetic tiny --backend cpu --threads 2 --iterations 1 --context 40 --prefill 70 "
      "--decode-batches 1,3 --verify-batches 1 --verify-k 2 --json";
  const CliRun r = run_specserve(flags + " --tensor-parallel 2");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tensor_parallel"], 2);
  ASSERT_EQ(j["collective"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& c = j["collective"][i];
    EXPECT_EQ(c["batch"], j["decode"][i]["batch"]);
    EXPECT_EQ(c["all_reduce_calls"], 2 * 8 + 1);  // the tiny shape has 8 layers
    EXPECT_GT(c["collective_ms"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(c["decode_ms"].get<double>(), j["decode"][i]["ms"].get<double>());
    EXPECT_NEAR(c["share_of_decode"].get<double>(), c["collective_ms"].get<double>() / c["decode_ms"].get<double>(),
                1e-12);
  }
  const CliRun text = run_specserve(flags.substr(0, flags.size() - 7) + " --tensor-parallel 2");
  ASSERT_EQ(text.status, 0) << text.out;
  // The CPU simulation places each rank in host memory of its own (docs/DESIGN.md §6.5).
  EXPECT_NE(text.out.find("tensor parallel, 2 ranks in host memories of their own"), std::string::npos) << text.out;
  EXPECT_EQ(j["tensor_parallel_placement"], "host memories of their own");
  const CliRun plain = run_specserve(flags);
  ASSERT_EQ(plain.status, 0) << plain.out;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("collective"));
}

const std::string kPair = std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/dflash/hybrid-trained";

// `bench steps --model` on the hybrid fixture pair, one batch of each step, with `extra` flags.
CliRun bench_pair(const std::string& extra) {
  return run_specserve("bench steps --model " + kPair + "/target --draft " + kPair +
                       "/draft --backend cpu --threads 2 --iterations 1 --context 20 --prefill 30 "
                       "--decode-batches 1 --verify-batches 1 --verify-k 16 " +
                       extra);
}

TEST(StepBenchCli, StepsOnACheckpointPair) {
  const std::string pair = kPair;
  const CliRun r = bench_pair("--draft-matmul exact --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], pair + "/target");
  EXPECT_EQ(j["draft_matmul"], "exact");
  EXPECT_EQ(j["dtype"], "BF16");
  ASSERT_EQ(j["propose"].size(), 1u);
  ASSERT_EQ(j["projection"].size(), 1u);
  EXPECT_GT(j["projection"][0]["plain_tokens_per_s"].get<double>(), 0);
}

TEST(StepBenchCli, DraftVocabularySubset) {
  const CliRun r = bench_pair("--draft-vocab 64 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // The 64 lowest ids and the config's EOS ids (no tokenizer here).
  EXPECT_GE(j["draft_vocab"].get<int64_t>(), 65);
  EXPECT_LE(j["draft_vocab"].get<int64_t>(), 66);
  EXPECT_EQ(j["draft_head_bytes"].get<double>(), 128.0 * 128 * 2);  // 65-66 bf16 rows of 128, padded to 128
  ASSERT_EQ(j["propose"].size(), 1u);
  EXPECT_GT(j["propose"][0]["ms"].get<double>(), 0);
  EXPECT_NE(bench_pair("--draft-vocab 0").status, 0);
}

TEST(StepBenchCli, StepsNeedsAModel) { EXPECT_NE(run_specserve("bench steps --backend cpu").status, 0); }

// The spellings from before bench had modes still run (cli/bench_modes.h: route_legacy_bench).
TEST(StepBenchCli, OldSpellingsStillRun) {
  const CliRun synthetic = run_specserve(
      "bench --synthetic tiny --backend cpu --threads 2 --iterations 1 --context 20 --prefill 30 "
      "--decode-batches 1 --verify-batches 1 --verify-k 2 --json");
  ASSERT_EQ(synthetic.status, 0) << synthetic.out;
  EXPECT_EQ(nlohmann::json::parse(synthetic.out)["model"], "synthetic tiny");
  const CliRun steps = run_specserve("bench --steps --model " + kPair +
                                     "/target --backend cpu --threads 2 "
                                     "--iterations 1 --context 20 --prefill 30 --decode-batches 1 "
                                     "--verify-batches 1 --verify-k 2 --json");
  ASSERT_EQ(steps.status, 0) << steps.out;
  EXPECT_EQ(nlohmann::json::parse(steps.out)["model"], kPair + "/target");
}

TEST(StepBenchCli, UnknownShapeNamesTheKnownOnes) {
  const CliRun r = run_specserve("bench steps --synthetic qwen9-1t --backend cpu 2>&1");
  EXPECT_NE(r.status, 0);
}

}  // namespace
}  // namespace specserve::testing
