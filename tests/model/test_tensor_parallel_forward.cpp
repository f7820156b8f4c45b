// The sharded target (docs/DESIGN.md §6.3), simulated on the CPU: N = 1 through the sharded path gives the
// unsharded bits; N = 2, 4 give the unsharded logits within the reduction's rounding, on the demo hybrid
// target and a tiny synthetic dense target; under N = 2 a row's bits are the same in a 1-row decode and in a
// 16-row verify (the all-reduce is row-invariant), with a partial commit replayed exactly.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "model/synthetic_shapes.h"
#include "model_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

// $SPECSERVE_SOURCE_DIR, when set, overrides the build's source tree (as in tests/spec/spec_test_util.h).
std::string demo_target() {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  return (env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR)) + "/models/demo-coder/target";
}

// A small Qwen3 dense config (every dimension divides by 4).
ModelConfig tiny_dense() {
  ModelConfig c = synthetic_shape("qwen3-8b").target;
  c.hidden_size = 256;
  c.num_layers = 3;
  c.layer_types.assign(3, LayerType::FullAttention);
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 32;
  c.intermediate_size = 512;
  c.vocab_size = 1000;
  return c;
}

std::vector<int32_t> random_ids(size_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

// What one model gives for: a prefill, a 6-row verify kept in part (3 rows), then two decodes.
struct Trace {
  std::vector<Tensor> logits;
  std::vector<Tensor> captured;
};

Trace run_trace(TargetModel& m) {
  const int64_t V = m.vocab_size();
  Trace t;
  auto s = m.new_sequence();
  auto keep = [&](ForwardResult r) {
    t.logits.push_back(std::move(r.logits));
    t.captured.push_back(std::move(r.captured));
  };
  keep(run_one(m, *s, random_ids(70, 1, V), SpanMode::Prefill, LogitsWanted::All, {0, 1}));
  keep(run_one(m, *s, random_ids(6, 2, V), SpanMode::Extend, LogitsWanted::All, {1}));
  m.commit(*s, 3);
  for (int32_t tok : {5, 9}) {
    keep(run_one(m, *s, {tok}, SpanMode::Extend, LogitsWanted::All, {1}));
    m.commit(*s, 1);
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.as<void>(), b.as<void>(), a.nbytes()) == 0;
}

std::unique_ptr<TargetModel> load_demo(const std::string& dtype, int tp) {
  return TargetModel::load(demo_target(), {.dtype = dtype, .tensor_parallel = tp});
}
std::unique_ptr<TargetModel> tiny(const std::string& dtype, int tp) {
  return TargetModel::synthetic(tiny_dense(), {.dtype = dtype, .tensor_parallel = tp}, 7);
}

TEST(TensorParallelForward, OneRankIsTheUnshardedModelBitForBit) {
  for (const std::string dtype : {"bf16", "f32"}) {
    const Trace plain = run_trace(*load_demo(dtype, 0)), one = run_trace(*load_demo(dtype, 1));
    for (size_t i = 0; i < plain.logits.size(); ++i) {
      EXPECT_TRUE(same_bits(plain.logits[i], one.logits[i])) << "demo " << dtype << " call " << i;
      EXPECT_TRUE(same_bits(plain.captured[i], one.captured[i])) << "demo " << dtype << " call " << i;
    }
    const Trace dense = run_trace(*tiny(dtype, 0)), dense_one = run_trace(*tiny(dtype, 1));
    for (size_t i = 0; i < dense.logits.size(); ++i)
      EXPECT_TRUE(same_bits(dense.logits[i], dense_one.logits[i])) << "dense " << dtype << " call " << i;
  }
}

// max over rows of rel_err.
double worst_rel_err(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const int64_t n = a.shape()[1];
  double worst = 0;
  for (int64_t r = 0; r < a.shape()[0]; ++r)
    worst = std::max(worst, rel_err(a.as<float>() + r * n, b.as<float>() + r * n, n));
  return worst;
}

void expect_close(const Trace& sharded, const Trace& plain, double tolerance, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < plain.logits.size(); ++i)
    worst = std::max(worst, worst_rel_err(sharded.logits[i], plain.logits[i]));
  EXPECT_LT(worst, tolerance) << what;
  EXPECT_GT(worst, 0.0) << what << ": the split should move some bits (else the test checks nothing)";
}

TEST(TensorParallelForward, TwoAndFourRanksGiveTheUnshardedLogitsWithinRounding) {
  // f32 weights and KV cache: only the reduction's rounding differs (measured ≤ 7e-7 relative). bf16: the KV
  // cache rounds k and v to bf16, where a last-bit difference can move a rounding (measured ≤ 1.1e-4 with the
  // AVX-512 f32 kernels); on a CPU with AVX512-BF16 the matmul kernel also rounds each input row to bf16, so a
  // last-bit difference of a reduced sum becomes one bf16 ulp (2^-8) of the next layer's input: measured
  // 2.2e-3 (dense) and 4.6e-3 (demo) on an AMD EPYC with AVX512-BF16. A wrong shard or a rank left out of a
  // reduction is off by O(1).
  for (const auto& [dtype, tolerance] : {std::pair<std::string, double>{"f32", 5e-6}, {"bf16", 2e-2}}) {
    const Trace demo = run_trace(*load_demo(dtype, 0)), dense = run_trace(*tiny(dtype, 0));
    for (int n : {2, 4}) {
      expect_close(run_trace(*load_demo(dtype, n)), demo, tolerance, "demo " + dtype + " N=" + std::to_string(n));
      expect_close(run_trace(*tiny(dtype, n)), dense, tolerance, "dense " + dtype + " N=" + std::to_string(n));
    }
  }
}

// Under N = 2: a 16-row verify's rows equal 16 successive decodes bit for bit (logits and captured features),
// beside another sequence's rows, and the states continue identically.
TEST(TensorParallelForward, VerifyRowsEqualDecodeRowsUnderTwoRanks) {
  for (int which = 0; which < 2; ++which) {
    const auto model = which == 0 ? load_demo("bf16", 2) : tiny("bf16", 2);
    const int64_t V = model->vocab_size();
    const auto prompt = random_ids(37, 3, V), draft = random_ids(16, 4, V);
    auto a = model->new_sequence(), b = model->new_sequence(), other = model->new_sequence();
    for (SequenceState* s : {a.get(), b.get(), other.get()})
      run_one(*model, *s, prompt, SpanMode::Prefill, LogitsWanted::None);
    ForwardBatch verify;
    const auto other_rows = random_ids(5, 5, V);
    verify.spans = {{other.get(), other_rows, SpanMode::Extend, LogitsWanted::All},
                    {a.get(), draft, SpanMode::Extend, LogitsWanted::All}};
    verify.capture_layers = {0, 2};
    const ForwardResult ext = model->forward(verify);
    model->commit(*a, 16);
    model->commit(*other, 5);
    for (size_t i = 0; i < draft.size(); ++i) {
      const auto dec = run_one(*model, *b, {draft[i]}, SpanMode::Extend, LogitsWanted::All, {0, 2});
      model->commit(*b, 1);
      ASSERT_EQ(row(dec.logits, 0), row(ext.logits, 5 + static_cast<int64_t>(i))) << "row " << i;
      ASSERT_EQ(row(dec.captured, 0), row(ext.captured, 5 + static_cast<int64_t>(i))) << "captured row " << i;
    }
    const auto next_a = run_one(*model, *a, {11}, SpanMode::Extend),
               next_b = run_one(*model, *b, {11}, SpanMode::Extend);
    EXPECT_EQ(row(next_a.logits, 0), row(next_b.logits, 0));
  }
}

// A partial commit replays the kept rows of every rank's DeltaNet state as decoding them would.
TEST(TensorParallelForward, PartialCommitEqualsDecodingTheKeptRows) {
  auto model = load_demo("bf16", 2);
  const int64_t V = model->vocab_size();
  const auto prompt = random_ids(20, 6, V), draft = random_ids(8, 7, V);
  auto a = model->new_sequence(), b = model->new_sequence();
  run_one(*model, *a, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(*model, *b, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(*model, *a, draft, SpanMode::Extend);
  model->commit(*a, 3);
  for (int i = 0; i < 3; ++i) {
    run_one(*model, *b, {draft[static_cast<size_t>(i)]}, SpanMode::Extend);
    model->commit(*b, 1);
  }
  EXPECT_EQ(row(run_one(*model, *a, {42}, SpanMode::Extend).logits, 0),
            row(run_one(*model, *b, {42}, SpanMode::Extend).logits, 0));
}

void expect_load_error(const std::function<void()>& load, const std::string& words) {
  try {
    load();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(TensorParallelForward, RefusesWhatItCannotSplit) {
  expect_load_error([] { load_demo("bf16", 3); }, "num_key_value_heads");  // 2 KV heads
  expect_load_error([] { load_demo("bf16", 8); }, "num_attention_heads");  // 4 query heads
  // Kept fp8 weights: their block scales are not split yet.
  expect_load_error([] { TargetModel::synthetic(synthetic_shape("tiny-fp8").target, {.tensor_parallel = 2}); }, "fp8");
}

}  // namespace
}  // namespace specserve
