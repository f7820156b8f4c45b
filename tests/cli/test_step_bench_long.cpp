// `specserve bench steps` on long prompts and long contexts (issue 27): --prefill and --contexts take
// lists and every entry is measured in the same run, the JSON carries each entry's numbers with its
// ratios computed from the entries, and a length whose KV does not fit the budget is skipped with a
// note. Tiny synthetic shape on the CPU; no timing is asserted, only that times are positive.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "../specserve_cli.h"

namespace specserve::testing {
namespace {

const char* const kTiny =
    "bench steps --synthetic tiny --backend cpu --threads 2 --iterations 1 --decode-batches 1 --verify-batches 1 "
    "--verify-k 2,4 ";

nlohmann::json bench_json(const std::string& extra) {
  const CliRun r = run_specserve(std::string(kTiny) + extra + " --json");
  EXPECT_EQ(r.status, 0) << r.out;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(StepBenchLong, PrefillListEachLengthWithTimeToFirstToken) {
  const auto j = bench_json("--prefill 64,200,300 --prefill-chunk 128 --contexts 40");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["prefill_chunk"], 128);
  ASSERT_EQ(j["prefill"].size(), 3u);
  const int lengths[] = {64, 200, 300};
  for (size_t i = 0; i < 3; ++i) {
    const auto& p = j["prefill"][i];
    EXPECT_EQ(p["tokens"], lengths[i]);
    EXPECT_FALSE(p.contains("skipped"));
    EXPECT_GE(p["iterations"].get<int>(), 1);
    EXPECT_EQ(p["chunk"], 128);
    EXPECT_GT(p["tokens_per_s"].get<double>(), 0);
    EXPECT_GT(p["ttft_ms"].get<double>(), 0);
    // Both from the same median: tokens / TTFT.
    EXPECT_NEAR(p["tokens_per_s"].get<double>() * p["ttft_ms"].get<double>() / 1e3, lengths[i], 1e-6 * lengths[i]);
    EXPECT_GT(p["matmul_flops"].get<double>(), 0);
    EXPECT_GT(p["matmul_tflops_effective"].get<double>(), 0);
    const double share = p["attention_share"].get<double>();
    EXPECT_GT(share, 0);
    EXPECT_LT(share, 1);
    EXPECT_FALSE(p.contains("matmul_fraction_of_gemm_rate"));  // no GEMM rate on the CPU
  }
  // Attention grows with n², the matmuls with n: the share grows with the length.
  EXPECT_GT(j["prefill"][2]["attention_share"].get<double>(), j["prefill"][0]["attention_share"].get<double>());
  EXPECT_NEAR(j["prefill"][2]["attention_flops"].get<double>() / j["prefill"][0]["attention_flops"].get<double>(),
              (300.0 * 300.0) / (64.0 * 64.0), 1e-9);
  EXPECT_FALSE(j.contains("gemm_rate"));
  ASSERT_TRUE(j.contains("matmul_prefill"));
  EXPECT_GT(j["matmul_prefill"]["tflops"].get<double>(), 0);
  EXPECT_EQ(j["matmul_prefill"]["k"], 256);  // the tiny shape's hidden size
  EXPECT_EQ(j["matmul_prefill"]["n"], 512);  // and its MLP width
}

TEST(StepBenchLong, ContextListWithRatiosToTheFirstAndKvReadBytes) {
  const auto j = bench_json("--prefill 64 --contexts 40,300,120");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["context"], 40);  // the batch tables run at the first entry
  ASSERT_EQ(j["contexts"].size(), 3u);
  EXPECT_EQ(j["kv_element_bytes"].get<double>(), 2.0);  // the bf16 cache (--kv-dtype auto, bf16 weights)
  EXPECT_EQ(j["kv_dtype"], "BF16");
  const auto& first = j["contexts"][0];
  const int positions[] = {40, 300, 120};
  for (size_t i = 0; i < 3; ++i) {
    const auto& c = j["contexts"][i];
    EXPECT_EQ(c["positions"], positions[i]);
    EXPECT_FALSE(c.contains("skipped"));
    EXPECT_EQ(c["verify_k"], 4);  // the largest --verify-k
    for (const char* key :
         {"decode_ms", "verify_ms", "propose_ms", "kv_read_gb_s", "kv_read_fraction_of_copy", "roofline_fraction"})
      EXPECT_GT(c[key].get<double>(), 0) << key;
    EXPECT_DOUBLE_EQ(c["decode_ratio_to_first"].get<double>(),
                     c["decode_ms"].get<double>() / first["decode_ms"].get<double>());
    EXPECT_DOUBLE_EQ(c["verify_ratio_to_first"].get<double>(),
                     c["verify_ms"].get<double>() / first["verify_ms"].get<double>());
    EXPECT_DOUBLE_EQ(c["propose_ratio_to_first"].get<double>(),
                     c["propose_ms"].get<double>() / first["propose_ms"].get<double>());
    EXPECT_DOUBLE_EQ(c["verify_ratio_to_decode"].get<double>(),
                     c["verify_ms"].get<double>() / c["decode_ms"].get<double>());
    // tiny: 2 attention layers (of 8: 3 DeltaNet layers then 1 attention, twice), 2 KV heads of 64,
    // bf16: K and V x 2 x 2 x 64 x positions x 2 bytes.
    EXPECT_DOUBLE_EQ(c["kv_read_bytes"].get<double>(), 2.0 * 2 * 2 * 64 * positions[i] * 2);
  }
  EXPECT_DOUBLE_EQ(first["decode_ratio_to_first"].get<double>(), 1.0);
}

// --kv-dtype f32 keeps the f32 cache: twice the bytes a position.
TEST(StepBenchLong, KvDtypeF32DoublesTheKvBytes) {
  const auto j = bench_json("--prefill 64 --contexts 40 --kv-dtype f32");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["kv_element_bytes"].get<double>(), 4.0);
  EXPECT_EQ(j["kv_dtype"], "F32");
  EXPECT_DOUBLE_EQ(j["contexts"][0]["kv_read_bytes"].get<double>(), 2.0 * 2 * 2 * 64 * 40 * 4);
}

TEST(StepBenchLong, LengthsOverTheKvBudgetAreSkippedWithANote) {
  // 2 MiB of KV (4 KiB a position here): 64 prompt tokens and 40 positions fit; 8,192 and 4,096
  // positions do not.
  const auto j = bench_json("--kv-cache-mib 2 --prefill 64,8192 --contexts 40,4096");
  ASSERT_TRUE(j.is_object());
  EXPECT_DOUBLE_EQ(j["kv_budget_bytes"].get<double>(), 2 << 20);
  ASSERT_EQ(j["prefill"].size(), 2u);
  EXPECT_FALSE(j["prefill"][0].contains("skipped"));
  EXPECT_EQ(j["prefill"][1]["tokens"], 8192);
  ASSERT_TRUE(j["prefill"][1].contains("skipped"));
  EXPECT_NE(j["prefill"][1]["skipped"].get<std::string>().find("--kv-cache-mib"), std::string::npos);
  EXPECT_FALSE(j["prefill"][1].contains("tokens_per_s"));
  ASSERT_EQ(j["contexts"].size(), 2u);
  EXPECT_GT(j["contexts"][0]["decode_ms"].get<double>(), 0);
  ASSERT_TRUE(j["contexts"][1].contains("skipped"));
  EXPECT_FALSE(j["contexts"][1].contains("decode_ms"));
  // The text tables say so too.
  const CliRun text = run_specserve(std::string(kTiny) + "--kv-cache-mib 2 --prefill 64,8192 --contexts 40,4096");
  ASSERT_EQ(text.status, 0);
  for (const char* label : {"prefill: whole prompts", "long contexts, 1 sequence", "skipped: needs",
                            "bf16 GEMM rate: not measured", "Ops::matmul_prefill alone"})
    EXPECT_NE(text.out.find(label), std::string::npos) << label << "\n" << text.out;
}

TEST(StepBenchLong, OldContextFlagIsTheFirstEntry) {
  const auto j = bench_json("--prefill 64 --context 48");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["context"], 48);
  ASSERT_EQ(j["contexts"].size(), 1u);
  EXPECT_EQ(j["contexts"][0]["positions"], 48);
  // Not both spellings at once; lists of positive lengths only.
  EXPECT_NE(run_specserve(std::string(kTiny) + "--context 48 --contexts 64").status, 0);
  EXPECT_NE(run_specserve(std::string(kTiny) + "--prefill 64,0").status, 0);
  EXPECT_NE(run_specserve(std::string(kTiny) + "--contexts 64,x").status, 0);
  EXPECT_NE(run_specserve(std::string(kTiny) + "--kv-cache-mib -1").status, 0);
}

}  // namespace
}  // namespace specserve::testing
