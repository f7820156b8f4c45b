// Parity with Hugging Face transformers beyond 16k positions (issue 27): fixtures from
// tools/reference/model/make_long_fixtures.py hold a random prompt of 16,500 tokens, transformers' fp32
// logits ("eager" attention, CPU) at a handful of positions (0, the edges of 2048-token chunks, 16,383 /
// 16,384 / 16,385 and the last 8) and 8 greedy decode steps after it. The prompt is prefilled the way the
// engine does, in 2048-token Prefill spans through TargetModel::forward, with f32 weights and an f32 KV
// cache (what `--dtype f32` resolves to) and with a bf16 KV cache; then the decode steps run as 1-row
// Extend spans on top of the prefilled cache.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>

#include "model_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

// true once tests/fixtures/model/qwen3_long and qwen3_5_long are committed: from then on a missing
// fixture fails the test instead of skipping it.
constexpr bool kLongFixturesCommitted = true;
constexpr const char* kGenerate = "python3 tools/reference/model/make_long_fixtures.py tests/fixtures/model";

constexpr int64_t kPrefillChunk = 2048;  // a multiple of the DeltaNet's 64-token chunk
constexpr int64_t kBeyond = 16384;       // the fixtures' prompts must reach past this position
// f32 cache: the tolerance of test_reference_parity.cpp (max |a - b| / max |b| over a logits row).
constexpr double kTolF32 = 1e-4;
// bf16 cache: keys and values are stored rounded to nearest even, a relative error of up to 2^-9 (0.2%)
// on every element the attention reads, which the layers after it amplify: between a bf16 and an f32
// cache, random models of these fixtures' shapes (weights of std 0.5, 16,500 positions) differed by up
// to 1.1e-2 on a row (2.4e-3 on the rows beyond 16k). The bound is ReferenceParity.KvCacheDtypes' 0.05:
// rounding passes, a wrong position, a stale block or a mis-rotated key (errors of the order of the
// logits themselves) fails; the f32 cache above holds the tight bound.
constexpr double kTolBf16 = 0.05;

struct LongCase {
  std::string fixture;
  std::string kv_dtype;  // "f32" or "bf16"; the weights are f32 either way
};
void PrintTo(const LongCase& c, std::ostream* os) { *os << c.fixture << " kv " << c.kv_dtype; }

// The argmax must agree wherever the reference's top-2 margin is wider than the error the tolerance
// allows on both entries; returns whether it was checked.
bool check_argmax(const float* got, const float* want, int64_t V, double tol, const std::string& where) {
  std::vector<float> top(want, want + V);
  std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
  double scale = 0;
  for (int64_t i = 0; i < V; ++i) scale = std::max(scale, double(std::fabs(want[i])));
  if (double(top[0]) - double(top[1]) <= 2 * tol * scale) return false;
  EXPECT_EQ(argmax(got, V), argmax(want, V)) << where;
  return true;
}

class LongContextParity : public ::testing::TestWithParam<LongCase> {};

TEST_P(LongContextParity, ChunkedPrefillAndDecodeBeyond16k) {
  const LongCase& c = GetParam();
  const std::string dir = fixture_dir(c.fixture);
  if (!std::filesystem::exists(dir + "/reference.safetensors")) {
    if (kLongFixturesCommitted) FAIL() << "fixture " << dir << " is missing: run " << kGenerate;
    GTEST_SKIP() << "fixture not generated: run " << kGenerate;
  }
  const double tol = c.kv_dtype == "f32" ? kTolF32 : kTolBf16;
  auto model = TargetModel::load(dir, {.dtype = "f32", .kv_dtype = c.kv_dtype});
  ASSERT_EQ(model->kv_dtype(), c.kv_dtype == "f32" ? DType::F32 : DType::BF16);
  Reference ref(dir);
  const auto prompt = ref.ids("prompt_ids");
  const auto positions = ref.ids("positions");
  const TensorView want = ref.f32("position_logits");
  const int64_t P = static_cast<int64_t>(prompt.size()), V = model->vocab_size();
  ASSERT_GT(P, kBeyond);
  ASSERT_EQ(want.dim(0), static_cast<int64_t>(positions.size()));
  ASSERT_EQ(want.dim(1), V);
  ASSERT_TRUE(std::is_sorted(positions.begin(), positions.end()));
  ASSERT_EQ(positions.back(), P - 1);  // the decode steps continue from the last stored row
  ASSERT_GT(positions.back(), kBeyond);

  auto seq = model->new_sequence();
  size_t next = 0;  // the first stored position not compared yet
  double worst = 0;
  int argmax_checked = 0;
  std::vector<float> last_row;
  for (int64_t start = 0; start < P; start += kPrefillChunk) {
    const int64_t end = std::min(P, start + kPrefillChunk);
    const bool wanted = next < positions.size() && positions[next] < end;
    const std::vector<int32_t> chunk(prompt.begin() + start, prompt.begin() + end);
    const ForwardResult r =
        run_one(*model, *seq, chunk, SpanMode::Prefill, wanted ? LogitsWanted::All : LogitsWanted::None);
    for (; next < positions.size() && positions[next] < end; ++next) {
      const int64_t p = positions[next];
      ASSERT_EQ(r.logits.shape()[0], end - start);
      const float* got = r.logits.as<float>() + (p - start) * V;
      const float* ref_row = want.as<const float>() + int64_t(next) * V;
      const double e = rel_err(got, ref_row, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, tol) << c.fixture << " kv " << c.kv_dtype << ": position " << p;
      argmax_checked += check_argmax(got, ref_row, V, tol, "position " + std::to_string(p));
      if (p == P - 1) last_row.assign(got, got + V);
    }
  }
  ASSERT_EQ(next, positions.size());
  ASSERT_EQ(seq->length(), P);
  std::printf("  %s kv %s: prompt logits max rel err %.3g at %zu positions up to %lld (%lld-token chunks)\n",
              c.fixture.c_str(), c.kv_dtype.c_str(), worst, positions.size(), static_cast<long long>(P - 1),
              static_cast<long long>(kPrefillChunk));

  // Decode: greedy_ids[i] goes in at position P + i (teacher-forced, so one rounding-sensitive argmax
  // cannot derail the steps after it); its logits are decode_logits[i].
  const auto greedy = ref.ids("greedy_ids");
  const TensorView want_decode = ref.f32("decode_logits");
  ASSERT_EQ(want_decode.dim(0), static_cast<int64_t>(greedy.size()));
  ASSERT_FALSE(greedy.empty());
  if (c.kv_dtype == "f32") {
    EXPECT_EQ(argmax(last_row.data(), V), greedy[0]);
  }
  double worst_decode = 0;
  for (size_t i = 0; i < greedy.size(); ++i) {
    const ForwardResult r = run_one(*model, *seq, {greedy[i]}, SpanMode::Extend, LogitsWanted::All);
    model->commit(*seq, 1);
    const float* ref_row = want_decode.as<const float>() + int64_t(i) * V;
    const double e = rel_err(r.logits.as<float>(), ref_row, V);
    worst_decode = std::max(worst_decode, e);
    EXPECT_LE(e, tol) << c.fixture << " kv " << c.kv_dtype << ": decode step " << i << " at position " << P + i;
    argmax_checked += check_argmax(r.logits.as<float>(), ref_row, V, tol, "decode step " + std::to_string(i));
    if (c.kv_dtype == "f32" && i + 1 < greedy.size()) {
      EXPECT_EQ(argmax(r.logits.as<float>(), V), greedy[i + 1]) << "decode step " << i;
    }
  }
  EXPECT_EQ(seq->length(), P + static_cast<int64_t>(greedy.size()));
  std::printf("  %s kv %s: decode logits max rel err %.3g over %zu steps; argmax agreed on %d clear-margin rows\n",
              c.fixture.c_str(), c.kv_dtype.c_str(), worst_decode, greedy.size(), argmax_checked);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LongContextParity,
                         ::testing::Values(LongCase{"qwen3_long", "f32"}, LongCase{"qwen3_long", "bf16"},
                                           LongCase{"qwen3_5_long", "f32"}, LongCase{"qwen3_5_long", "bf16"}),
                         [](const auto& i) { return i.param.fixture + "_kv" + i.param.kv_dtype; });

}  // namespace
}  // namespace specserve
