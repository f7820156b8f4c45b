#pragma once
// The row rule's checks (docs/DESIGN.md §1.1) on any backend, shared by the CPU suite
// (test_row_invariance.cpp) and the CUDA one (model_cuda/test_cuda_row_invariance.cpp): extend rows equal
// successive decodes, and a row alone equals the same row inside a batch of eight unrelated rows — logits and
// captured features bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "model_test_util.h"

namespace specserve::testing {

inline std::vector<int32_t> random_ids(size_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % vocab);
  return v;
}

// A 9-row extend after a 21-token prompt against 9 successive decodes of the same tokens, and the states
// after them. `after_extend` runs right after the extend (a backend's own checks of that call).
inline void expect_extend_equals_successive_decodes(TargetModel& m, const std::function<void()>& after_extend = {}) {
  const int64_t V = m.vocab_size();
  auto prompt = random_ids(21, 1, V);
  auto draft = random_ids(9, 2, V);
  auto a = m.new_sequence(), b = m.new_sequence();
  run_one(m, *a, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(m, *b, prompt, SpanMode::Prefill, LogitsWanted::None);
  auto ext = run_one(m, *a, draft, SpanMode::Extend, LogitsWanted::All, {0, 1});
  if (after_extend) after_extend();
  m.commit(*a, static_cast<int64_t>(draft.size()));
  for (size_t i = 0; i < draft.size(); ++i) {
    auto dec = run_one(m, *b, {draft[i]}, SpanMode::Extend, LogitsWanted::All, {0, 1});
    m.commit(*b, 1);
    ASSERT_EQ(row(dec.logits, 0), row(ext.logits, static_cast<int64_t>(i))) << "row " << i;
    ASSERT_EQ(row(dec.captured, 0), row(ext.captured, static_cast<int64_t>(i))) << "captured row " << i;
  }
  // And the states continue identically.
  auto next_a = run_one(m, *a, {5}, SpanMode::Extend);
  auto next_b = run_one(m, *b, {5}, SpanMode::Extend);
  EXPECT_EQ(row(next_a.logits, 0), row(next_b.logits, 0));
}

// One decode row alone against the same row as the fourth span of a batch of eight, beside seven unrelated
// sequences with other histories and span kinds (one-row and longer extends, a prefill).
inline void expect_row_alone_equals_row_in_batch_of_eight(TargetModel& m) {
  const int64_t V = m.vocab_size();
  auto prompt = random_ids(30, 3, V);
  auto target = m.new_sequence();
  auto twin = m.new_sequence();
  run_one(m, *target, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(m, *twin, prompt, SpanMode::Prefill, LogitsWanted::None);
  auto alone = run_one(m, *twin, {7}, SpanMode::Extend, LogitsWanted::All, {1});

  std::vector<std::unique_ptr<SequenceState>> others;
  std::vector<std::vector<int32_t>> toks;
  ForwardBatch batch;
  batch.capture_layers = {1};
  for (int i = 0; i < 7; ++i) {
    others.push_back(m.new_sequence());
    run_one(m, *others.back(), random_ids(5 + 11 * i, 10 + i, V), SpanMode::Prefill, LogitsWanted::None);
    toks.push_back(random_ids(i % 3 == 0 ? 1 : 2 + i, 20 + i, V));
  }
  const std::vector<int32_t> seven = {7};
  for (int i = 0; i < 7; ++i) {
    if (i == 3) batch.spans.push_back({target.get(), seven, SpanMode::Extend, LogitsWanted::All});
    batch.spans.push_back({others[i].get(), toks[i], i == 5 ? SpanMode::Prefill : SpanMode::Extend, LogitsWanted::All});
  }
  auto r = m.forward(batch);
  const int64_t first = r.span_first_row[3];
  auto it = std::find(r.logit_rows.begin(), r.logit_rows.end(), first);
  ASSERT_NE(it, r.logit_rows.end());
  EXPECT_EQ(row(r.logits, it - r.logit_rows.begin()), row(alone.logits, 0));
  EXPECT_EQ(row(r.captured, first), row(alone.captured, 0));
}

}  // namespace specserve::testing
