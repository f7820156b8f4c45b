#pragma once
// Checks against the transformers fixtures (tools/reference/model/make_fixtures.py) on any backend, shared by
// the CPU suite (test_reference_parity.cpp) and the CUDA one (model_cuda/test_cuda_reference_parity.cpp): the
// greedy continuation with the logits of its first decode steps, and a multi-token extend on top of the
// prompt's cache, each logits row within `tol` (relative) of the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "model_test_util.h"

namespace specserve::testing {

// The prompt's logits at every position, run as one prefill or as extend rows, each row within `tol` of the
// reference's; returns the largest relative error.
inline double expect_prompt_logits(TargetModel& m, Reference& ref, SpanMode mode, double tol) {
  auto prompt = ref.ids("prompt_ids");
  TensorView want = ref.f32("prompt_logits");
  const int64_t V = m.vocab_size();
  auto seq = m.new_sequence();
  const ForwardResult r = run_one(m, *seq, prompt, mode, LogitsWanted::All);
  double worst = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const double e = rel_err(r.logits.as<float>() + p * V, want.as<const float>() + p * V, V);
    worst = std::max(worst, e);
    EXPECT_LE(e, tol) << "prompt row " << p;
  }
  return worst;
}

// The prompt goes in as one prefill (`prompt_mode` Prefill) or as extend rows (Extend, then committed: the
// decode path's kernels throughout).
inline void expect_greedy_continuation_and_decode_logits(TargetModel& m, Reference& ref, double tol,
                                                         const std::string& name,
                                                         SpanMode prompt_mode = SpanMode::Prefill) {
  auto prompt = ref.ids("prompt_ids");
  auto want_ids = ref.ids("greedy_ids");
  TensorView want_logits = ref.f32("decode_logits");
  ASSERT_GE(want_ids.size(), 32u);
  const int64_t V = m.vocab_size();
  auto seq = m.new_sequence();
  auto r = run_one(m, *seq, prompt, prompt_mode, LogitsWanted::Last);
  if (prompt_mode == SpanMode::Extend) m.commit(*seq, static_cast<int64_t>(prompt.size()));
  std::vector<int32_t> got;
  double worst = 0;
  int32_t tok = argmax(r.logits.as<float>(), V);
  for (size_t i = 0; i < want_ids.size(); ++i) {
    got.push_back(tok);
    r = run_one(m, *seq, {tok}, SpanMode::Extend);
    m.commit(*seq, 1);
    if (i < static_cast<size_t>(want_logits.dim(0))) {
      const double e = rel_err(r.logits.as<float>(), want_logits.as<const float>() + i * V, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, tol) << "decode step " << i;
    }
    tok = argmax(r.logits.as<float>(), V);
  }
  EXPECT_EQ(got, want_ids);
  std::printf("  %s: decode logits max rel err %.3g over %lld steps; %zu greedy tokens compared\n", name.c_str(), worst,
              static_cast<long long>(want_logits.dim(0)), want_ids.size());
}

inline void expect_extend_from_cache(TargetModel& m, Reference& ref, double tol, const std::string& name) {
  auto prompt = ref.ids("prompt_ids");
  auto ext = ref.ids("extend_ids");
  TensorView want = ref.f32("extend_logits");
  const int64_t V = m.vocab_size();
  auto seq = m.new_sequence();
  run_one(m, *seq, prompt, SpanMode::Prefill, LogitsWanted::None);
  auto r = run_one(m, *seq, ext, SpanMode::Extend, LogitsWanted::All);
  double worst = 0;
  for (size_t i = 0; i < ext.size(); ++i) {
    const double e = rel_err(r.logits.as<float>() + i * V, want.as<const float>() + i * V, V);
    worst = std::max(worst, e);
    EXPECT_LE(e, tol) << "extend row " << i;
  }
  std::printf("  %s: extend logits max rel err %.3g over %zu rows\n", name.c_str(), worst, ext.size());
  m.commit(*seq, static_cast<int64_t>(ext.size()));
  EXPECT_EQ(seq->length(), static_cast<int64_t>(prompt.size() + ext.size()));
}

}  // namespace specserve::testing
