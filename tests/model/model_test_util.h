#pragma once
// Helpers for the model tests: fixture paths, reading reference tensors, running spans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/target_model.h"

namespace specserve::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/model/" + name;
}

inline const std::vector<std::string>& all_fixtures() {
  static const std::vector<std::string> v = {"qwen3_untied", "qwen3_tied", "qwen3_5_flat", "qwen3_5_vl"};
  return v;
}

// The FP8 (block-128) fixtures of tools/reference/model/make_fp8_fixtures.py: checkpoints transformers
// quantised, with the fp32 references of their dequantised models.
inline const std::vector<std::string>& fp8_fixtures() {
  static const std::vector<std::string> v = {"qwen3_fp8", "qwen3_5_fp8", "qwen3_fp8_bf16_scales"};
  return v;
}

struct Reference {
  std::unique_ptr<SafetensorsFile> file;
  explicit Reference(const std::string& dir) : file(SafetensorsFile::open(dir + "/reference.safetensors")) {}
  std::vector<int32_t> ids(const std::string& name) const {
    TensorView v = file->view(name);
    std::vector<int32_t> out(static_cast<size_t>(v.numel()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(v.as<const int64_t>()[i]);
    return out;
  }
  TensorView f32(const std::string& name) const { return file->view(name); }
};

// max |a - b| / max |b| over one row of logits.
inline double rel_err(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, double(std::fabs(a[i] - b[i])));
    den = std::max(den, double(std::fabs(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// Lowest id among the maxima.
inline int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

inline ForwardResult run_one(TargetModel& m, SequenceState& s, const std::vector<int32_t>& toks, SpanMode mode,
                             LogitsWanted want = LogitsWanted::All, std::vector<int> capture = {}) {
  ForwardBatch b;
  b.spans.push_back({&s, toks, mode, want});
  b.capture_layers = std::move(capture);
  return m.forward(b);
}

// n random token ids below `vocab`, the same for the same seed.
inline std::vector<int32_t> random_ids(size_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

inline std::vector<float> row(const Tensor& t, int64_t r) {
  const int64_t n = t.shape()[1];
  return std::vector<float>(t.as<float>() + r * n, t.as<float>() + (r + 1) * n);
}

// ForwardResult::argmax: a batch mixing spans that want full logits rows and spans that want only
// their argmax (over fewer columns than the row, as a padded vocabulary) gives each argmax span the
// argmax of the rows the same forward returns in full (the rows are the same bits either way), -2 on
// the other spans' rows, and the full spans' rows unchanged.
inline void check_forward_argmax(TargetModel& m) {
  const int64_t V = m.vocab_size(), columns = V - 3;
  const std::vector<int32_t> prompt{1, 5, 9, 2, 7, 3}, draft{4, 8, 6};
  auto a = m.new_sequence(), b = m.new_sequence(), a2 = m.new_sequence(), b2 = m.new_sequence();
  for (SequenceState* s : {a.get(), b.get(), a2.get(), b2.get()})
    run_one(m, *s, prompt, SpanMode::Prefill, LogitsWanted::None);
  ForwardBatch full, mixed;
  full.spans = {{a.get(), draft, SpanMode::Extend, LogitsWanted::All},
                {b.get(), draft, SpanMode::Extend, LogitsWanted::All}};
  mixed.spans = {{a2.get(), draft, SpanMode::Extend, LogitsWanted::All, columns},
                 {b2.get(), draft, SpanMode::Extend, LogitsWanted::All}};
  const ForwardResult f = m.forward(full), x = m.forward(mixed);
  ASSERT_TRUE(f.argmax.empty());
  ASSERT_EQ(x.argmax.size(), 2 * draft.size());
  for (size_t r = 0; r < draft.size(); ++r) {
    EXPECT_EQ(x.argmax[r], argmax(f.logits.as<float>() + int64_t(r) * V, columns)) << "row " << r;
    EXPECT_EQ(x.argmax[draft.size() + r], -2);
    const int64_t other = int64_t(draft.size() + r);
    EXPECT_EQ(row(x.logits, other), row(f.logits, other)) << "full row " << other;
  }
}

// The same dtype, shape and bytes.
inline bool same_bits(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// Prefill logits of `prompt`, 8 greedy decode steps and a 5-token extend: bit for bit between two models
// (the FP8 checkpoint tests: a checkpoint against its dequantised twin, on the CPU and on CUDA).
inline void expect_same_logits(TargetModel& a, TargetModel& b, const std::vector<int32_t>& prompt) {
  auto sa = a.new_sequence(), sb = b.new_sequence();
  ForwardResult ra = run_one(a, *sa, prompt, SpanMode::Prefill), rb = run_one(b, *sb, prompt, SpanMode::Prefill);
  ASSERT_TRUE(same_bits(ra.logits, rb.logits)) << "prompt logits differ";
  const int64_t V = a.vocab_size();
  int32_t tok = argmax(ra.logits.as<float>() + (static_cast<int64_t>(prompt.size()) - 1) * V, V);
  for (int step = 0; step < 8; ++step) {
    ra = run_one(a, *sa, {tok}, SpanMode::Extend);
    rb = run_one(b, *sb, {tok}, SpanMode::Extend);
    a.commit(*sa, 1);
    b.commit(*sb, 1);
    ASSERT_TRUE(same_bits(ra.logits, rb.logits)) << "decode step " << step;
    tok = argmax(ra.logits.as<float>(), V);
  }
  ra = run_one(a, *sa, {3, 1, 4, 1, 5}, SpanMode::Extend);
  rb = run_one(b, *sb, {3, 1, 4, 1, 5}, SpanMode::Extend);
  ASSERT_TRUE(same_bits(ra.logits, rb.logits)) << "extend";
}

}  // namespace specserve::testing
