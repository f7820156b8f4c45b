#pragma once
// What the sharded-model tests share on the CPU (test_tensor_parallel_forward.cpp) and on the GPU
// (../model_cuda/test_cuda_tensor_parallel.cpp): the models (the demo hybrid target, a tiny synthetic dense
// one), a trace of calls to compare (prefill, a partly kept verify, decodes), and the check that a verify's
// rows equal decoding them one by one, bit for bit.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "model/synthetic_shapes.h"
#include "model_test_util.h"

namespace specserve::testing {

// $SPECSERVE_SOURCE_DIR, when set, overrides the build's source tree (as in tests/spec/spec_test_util.h).
inline std::string demo_target() {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  return (env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR)) + "/models/demo-coder/target";
}

// A small Qwen3 dense config (every dimension divides by 4).
inline ModelConfig tiny_dense() {
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

// A small Qwen3.5 hybrid config with the demo target's dimensions (hidden 512, attention heads of 128 with the
// output gate and a quarter rotated, DeltaNet key / value heads of 64, 4 / 8 of them, MLP 896, vocabulary
// 8,192, tied embeddings) and four layers, three DeltaNet and one attention: for random weights where a test
// must not need the demo checkpoint (the GPU suites, whose machine may not have it).
inline ModelConfig tiny_hybrid() {
  ModelConfig c = synthetic_shape("qwen3.6-27b").target;
  c.hidden_size = 512;
  c.num_layers = 4;
  c.layer_types = {LayerType::LinearAttention, LayerType::LinearAttention, LayerType::LinearAttention,
                   LayerType::FullAttention};
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.partial_rotary_factor = 0.25;
  c.linear_num_key_heads = 4;
  c.linear_num_value_heads = 8;
  c.linear_key_head_dim = 64;
  c.linear_value_head_dim = 64;
  c.linear_conv_kernel_dim = 4;
  c.intermediate_size = 896;
  c.vocab_size = 8192;
  c.tie_word_embeddings = true;
  return c;
}

// A small hybrid of the fp8 synthetic shape with 128-wide heads (as Qwen3.6-27B's), so that two ranks split its
// kept fp8 matrices on 128 x 128 scale blocks.
inline ModelConfig aligned_hybrid_fp8() {
  ModelConfig c = synthetic_shape("tiny-fp8").target;
  c.hidden_size = 256;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.intermediate_size = 256;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 4;
  return c;
}

// What one model gives for: a prefill, a 6-row verify kept in part (3 rows), then two decodes.
struct Trace {
  std::vector<Tensor> logits;
  std::vector<Tensor> captured;
};

inline Trace run_trace(TargetModel& m) {
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

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.as<void>(), b.as<void>(), a.nbytes()) == 0;
}

// Every call's logits (and with `captured`, the captured features) bit for bit.
inline void expect_same_trace(const Trace& a, const Trace& b, const std::string& what, bool captured = true) {
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (size_t i = 0; i < a.logits.size(); ++i) {
    EXPECT_TRUE(same_bits(a.logits[i], b.logits[i])) << what << " call " << i;
    if (captured) {
      EXPECT_TRUE(same_bits(a.captured[i], b.captured[i])) << what << " call " << i << " (captured)";
    }
  }
}

// max over rows of rel_err.
inline double worst_rel_err(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const int64_t n = a.shape()[1];
  double worst = 0;
  for (int64_t r = 0; r < a.shape()[0]; ++r)
    worst = std::max(worst, rel_err(a.as<float>() + r * n, b.as<float>() + r * n, n));
  return worst;
}

// Every call's logits within `tolerance` (max rel_err of a row), and not all bit-equal (`must_differ`: a
// split that moved no bit would check nothing).
inline void expect_close(const Trace& sharded, const Trace& plain, double tolerance, const std::string& what,
                         bool must_differ = true) {
  double worst = 0;
  for (size_t i = 0; i < plain.logits.size(); ++i)
    worst = std::max(worst, worst_rel_err(sharded.logits[i], plain.logits[i]));
  EXPECT_LT(worst, tolerance) << what;
  if (must_differ) {
    EXPECT_GT(worst, 0.0) << what << ": the split should move some bits (else the test checks nothing)";
  }
}

// A 16-row verify's rows (beside another sequence's 5 rows) equal 16 successive decodes of the same tokens bit
// for bit (logits and the features captured at layers 0 and 2), and the two sequences continue identically.
inline void expect_verify_rows_equal_decode_rows(TargetModel& model) {
  const int64_t V = model.vocab_size();
  const auto prompt = random_ids(37, 3, V), draft = random_ids(16, 4, V);
  auto a = model.new_sequence(), b = model.new_sequence(), other = model.new_sequence();
  for (SequenceState* s : {a.get(), b.get(), other.get()})
    run_one(model, *s, prompt, SpanMode::Prefill, LogitsWanted::None);
  ForwardBatch verify;
  const auto other_rows = random_ids(5, 5, V);
  verify.spans = {{other.get(), other_rows, SpanMode::Extend, LogitsWanted::All},
                  {a.get(), draft, SpanMode::Extend, LogitsWanted::All}};
  verify.capture_layers = {0, 2};
  const ForwardResult ext = model.forward(verify);
  model.commit(*a, 16);
  model.commit(*other, 5);
  for (size_t i = 0; i < draft.size(); ++i) {
    const auto dec = run_one(model, *b, {draft[i]}, SpanMode::Extend, LogitsWanted::All, {0, 2});
    model.commit(*b, 1);
    ASSERT_EQ(row(dec.logits, 0), row(ext.logits, 5 + static_cast<int64_t>(i))) << "row " << i;
    ASSERT_EQ(row(dec.captured, 0), row(ext.captured, 5 + static_cast<int64_t>(i))) << "captured row " << i;
  }
  const auto next_a = run_one(model, *a, {11}, SpanMode::Extend), next_b = run_one(model, *b, {11}, SpanMode::Extend);
  EXPECT_EQ(row(next_a.logits, 0), row(next_b.logits, 0));
}

// A partial commit (3 rows of an 8-row extend) leaves every DeltaNet state, every rank's included, as decoding
// the kept rows one by one does: the next decode's logits are the same.
inline void expect_partial_commit_equals_decoding(TargetModel& model) {
  const int64_t V = model.vocab_size();
  const auto prompt = random_ids(20, 6, V), draft = random_ids(8, 7, V);
  auto a = model.new_sequence(), b = model.new_sequence();
  run_one(model, *a, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(model, *b, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(model, *a, draft, SpanMode::Extend);
  model.commit(*a, 3);
  for (int i = 0; i < 3; ++i) {
    run_one(model, *b, {draft[static_cast<size_t>(i)]}, SpanMode::Extend);
    model.commit(*b, 1);
  }
  EXPECT_EQ(row(run_one(model, *a, {42}, SpanMode::Extend).logits, 0),
            row(run_one(model, *b, {42}, SpanMode::Extend).logits, 0));
}

}  // namespace specserve::testing
