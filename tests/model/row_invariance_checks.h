#pragma once
// The row rule's checks (docs/DESIGN.md §1.1) on any backend, shared by the CPU suite
// (test_row_invariance.cpp) and the CUDA one (model_cuda/test_cuda_row_invariance.cpp): extend rows equal
// successive decodes, and a row alone equals the same row inside a batch of eight unrelated rows — logits and
// captured features bit for bit; prefill rows ignore their neighbours and chunk cuts; a partial commit equals a
// run that saw only the kept rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "model_test_util.h"

namespace specserve::testing {

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

// The prefill rule (docs/DESIGN.md §1.2): a 150-token prompt prefilled alone, beside two other sequences'
// prefills, and in two calls cut at a multiple of 64 gives every row's logits bit for bit, and a decode row
// after each agrees.
inline void expect_prefill_independent_of_neighbours_and_chunk_splits(TargetModel& m) {
  const int64_t V = m.vocab_size();
  auto prompt = random_ids(150, 4, V);
  auto alone = m.new_sequence();
  auto r1 = run_one(m, *alone, prompt, SpanMode::Prefill, LogitsWanted::All);

  auto mixed = m.new_sequence();
  auto n1 = m.new_sequence(), n2 = m.new_sequence();
  auto t1 = random_ids(40, 5, V), t2 = random_ids(3, 6, V);
  ForwardBatch b;
  b.spans = {{n1.get(), t1, SpanMode::Prefill, LogitsWanted::All},
             {mixed.get(), prompt, SpanMode::Prefill, LogitsWanted::All},
             {n2.get(), t2, SpanMode::Prefill, LogitsWanted::Last}};
  auto r2 = m.forward(b);
  const int64_t off = static_cast<int64_t>(t1.size());
  for (size_t p = 0; p < prompt.size(); ++p)
    ASSERT_EQ(row(r2.logits, off + static_cast<int64_t>(p)), row(r1.logits, static_cast<int64_t>(p))) << p;

  // The same prompt prefilled in two calls split at a multiple of 64.
  auto split = m.new_sequence();
  std::vector<int32_t> head(prompt.begin(), prompt.begin() + 128), tail(prompt.begin() + 128, prompt.end());
  run_one(m, *split, head, SpanMode::Prefill, LogitsWanted::None);
  auto r3 = run_one(m, *split, tail, SpanMode::Prefill, LogitsWanted::All);
  for (size_t p = 0; p < tail.size(); ++p)
    ASSERT_EQ(row(r3.logits, static_cast<int64_t>(p)), row(r1.logits, static_cast<int64_t>(128 + p))) << p;

  // Decoding afterwards agrees too.
  auto d1 = run_one(m, *alone, {9}, SpanMode::Extend);
  auto d2 = run_one(m, *mixed, {9}, SpanMode::Extend);
  auto d3 = run_one(m, *split, {9}, SpanMode::Extend);
  EXPECT_EQ(row(d1.logits, 0), row(d2.logits, 0));
  EXPECT_EQ(row(d1.logits, 0), row(d3.logits, 0));
}

// A verify of 6 rows committed in part (n = 1..6) continues — through a 5-row extend and a decode — exactly as
// a sequence that only ever saw the kept rows.
inline void expect_rollback_equals_run_that_saw_only_kept_rows(TargetModel& m) {
  const int64_t V = m.vocab_size();
  auto prompt = random_ids(37, 7, V);
  auto draft = random_ids(6, 8, V);
  auto cont = random_ids(5, 9, V);
  for (int64_t n = 1; n <= static_cast<int64_t>(draft.size()); ++n) {
    auto spec = m.new_sequence(), plain = m.new_sequence();
    run_one(m, *spec, prompt, SpanMode::Prefill, LogitsWanted::None);
    run_one(m, *plain, prompt, SpanMode::Prefill, LogitsWanted::None);
    run_one(m, *spec, draft, SpanMode::Extend, LogitsWanted::All);
    m.commit(*spec, n);
    std::vector<int32_t> kept(draft.begin(), draft.begin() + n);
    run_one(m, *plain, kept, SpanMode::Extend, LogitsWanted::None);
    m.commit(*plain, n);
    ASSERT_EQ(spec->length(), plain->length());
    // Continue both with a multi-row extend, then single decodes.
    auto a = run_one(m, *spec, cont, SpanMode::Extend, LogitsWanted::All);
    auto b = run_one(m, *plain, cont, SpanMode::Extend, LogitsWanted::All);
    ASSERT_EQ(0, std::memcmp(a.logits.as<float>(), b.logits.as<float>(), a.logits.nbytes())) << "n = " << n;
    m.commit(*spec, 2);
    m.commit(*plain, 2);
    auto c = run_one(m, *spec, {11}, SpanMode::Extend);
    auto d = run_one(m, *plain, {11}, SpanMode::Extend);
    ASSERT_EQ(row(c.logits, 0), row(d.logits, 0)) << "n = " << n;
  }
}

}  // namespace specserve::testing
