// The lossless promise (docs/DESIGN.md §1, docs/DFLASH.md §6.6): extend rows equal successive decodes bit for bit;
// a row's logits and captured features do not depend on the other rows or sequences in the batch;
// prefill does not depend on its batch neighbours (nor on a split at 64-token chunk boundaries).

#include "row_invariance_checks.h"

namespace specserve {
namespace {

using namespace specserve::testing;

struct Case {
  std::string fixture;
  std::string dtype;
  std::string kv_dtype = "auto";  // auto: f32 for f32 weights, else bf16
};

class RowInvariance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    model_ = TargetModel::load(fixture_dir(GetParam().fixture),
                               {.dtype = GetParam().dtype, .kv_dtype = GetParam().kv_dtype});
  }
  int64_t V() const { return model_->vocab_size(); }
  std::unique_ptr<TargetModel> model_;
};

TEST_P(RowInvariance, ExtendEqualsSuccessiveDecodes) { expect_extend_equals_successive_decodes(*model_); }

TEST_P(RowInvariance, RowAloneEqualsRowInBatchOfEight) { expect_row_alone_equals_row_in_batch_of_eight(*model_); }

TEST_P(RowInvariance, PrefillIndependentOfNeighboursAndChunkSplits) {
  auto prompt = random_ids(150, 4, V());
  auto alone = model_->new_sequence();
  auto r1 = run_one(*model_, *alone, prompt, SpanMode::Prefill, LogitsWanted::All);

  auto mixed = model_->new_sequence();
  auto n1 = model_->new_sequence(), n2 = model_->new_sequence();
  auto t1 = random_ids(40, 5, V()), t2 = random_ids(3, 6, V());
  ForwardBatch b;
  b.spans = {{n1.get(), t1, SpanMode::Prefill, LogitsWanted::All},
             {mixed.get(), prompt, SpanMode::Prefill, LogitsWanted::All},
             {n2.get(), t2, SpanMode::Prefill, LogitsWanted::Last}};
  auto r2 = model_->forward(b);
  const int64_t off = static_cast<int64_t>(t1.size());
  for (size_t p = 0; p < prompt.size(); ++p)
    ASSERT_EQ(row(r2.logits, off + static_cast<int64_t>(p)), row(r1.logits, static_cast<int64_t>(p))) << p;

  // The same prompt prefilled in two calls split at a multiple of 64.
  auto split = model_->new_sequence();
  std::vector<int32_t> head(prompt.begin(), prompt.begin() + 128), tail(prompt.begin() + 128, prompt.end());
  run_one(*model_, *split, head, SpanMode::Prefill, LogitsWanted::None);
  auto r3 = run_one(*model_, *split, tail, SpanMode::Prefill, LogitsWanted::All);
  for (size_t p = 0; p < tail.size(); ++p)
    ASSERT_EQ(row(r3.logits, static_cast<int64_t>(p)), row(r1.logits, static_cast<int64_t>(128 + p))) << p;

  // Decoding afterwards agrees too.
  auto d1 = run_one(*model_, *alone, {9}, SpanMode::Extend);
  auto d2 = run_one(*model_, *mixed, {9}, SpanMode::Extend);
  auto d3 = run_one(*model_, *split, {9}, SpanMode::Extend);
  EXPECT_EQ(row(d1.logits, 0), row(d2.logits, 0));
  EXPECT_EQ(row(d1.logits, 0), row(d3.logits, 0));
}

TEST_P(RowInvariance, RollbackEqualsRunThatSawOnlyKeptRows) {
  auto prompt = random_ids(37, 7, V());
  auto draft = random_ids(6, 8, V());
  auto cont = random_ids(5, 9, V());
  for (int64_t n = 1; n <= static_cast<int64_t>(draft.size()); ++n) {
    auto spec = model_->new_sequence(), plain = model_->new_sequence();
    run_one(*model_, *spec, prompt, SpanMode::Prefill, LogitsWanted::None);
    run_one(*model_, *plain, prompt, SpanMode::Prefill, LogitsWanted::None);
    run_one(*model_, *spec, draft, SpanMode::Extend, LogitsWanted::All);
    model_->commit(*spec, n);
    std::vector<int32_t> kept(draft.begin(), draft.begin() + n);
    run_one(*model_, *plain, kept, SpanMode::Extend, LogitsWanted::None);
    model_->commit(*plain, n);
    ASSERT_EQ(spec->length(), plain->length());
    // Continue both with a multi-row extend, then single decodes.
    auto a = run_one(*model_, *spec, cont, SpanMode::Extend, LogitsWanted::All);
    auto b = run_one(*model_, *plain, cont, SpanMode::Extend, LogitsWanted::All);
    ASSERT_EQ(0, std::memcmp(a.logits.as<float>(), b.logits.as<float>(), a.logits.nbytes())) << "n = " << n;
    model_->commit(*spec, 2);
    model_->commit(*plain, 2);
    auto c = run_one(*model_, *spec, {11}, SpanMode::Extend);
    auto d = run_one(*model_, *plain, {11}, SpanMode::Extend);
    ASSERT_EQ(row(c.logits, 0), row(d.logits, 0)) << "n = " << n;
  }
}

// commit_many (the engine's one call a step): four sequences verified in one forward and committed
// together, full and partial acceptances mixed, continue exactly as twins committed one at a time.
TEST_P(RowInvariance, CommitManyEqualsCommittingEachAlone) {
  const std::vector<int64_t> keep = {6, 1, 3, 5};
  std::vector<std::unique_ptr<SequenceState>> many, alone;
  std::vector<std::vector<int32_t>> drafts;
  ForwardBatch batch;
  for (size_t i = 0; i < keep.size(); ++i) {
    auto prompt = random_ids(20 + 7 * i, static_cast<uint32_t>(40 + i), V());
    drafts.push_back(random_ids(6, static_cast<uint32_t>(50 + i), V()));
    many.push_back(model_->new_sequence());
    alone.push_back(model_->new_sequence());
    run_one(*model_, *many.back(), prompt, SpanMode::Prefill, LogitsWanted::None);
    run_one(*model_, *alone.back(), prompt, SpanMode::Prefill, LogitsWanted::None);
  }
  for (size_t i = 0; i < keep.size(); ++i)
    batch.spans.push_back({many[i].get(), drafts[i], SpanMode::Extend, LogitsWanted::None});
  model_->forward(batch);
  std::vector<std::pair<SequenceState*, int64_t>> commits;
  for (size_t i = 0; i < keep.size(); ++i) commits.emplace_back(many[i].get(), keep[i]);
  model_->commit_many(commits);
  for (size_t i = 0; i < keep.size(); ++i) {
    run_one(*model_, *alone[i], drafts[i], SpanMode::Extend, LogitsWanted::None);
    model_->commit(*alone[i], keep[i]);
    ASSERT_EQ(many[i]->length(), alone[i]->length());
    auto a = run_one(*model_, *many[i], {11, 12}, SpanMode::Extend, LogitsWanted::All);
    auto b = run_one(*model_, *alone[i], {11, 12}, SpanMode::Extend, LogitsWanted::All);
    ASSERT_EQ(0, std::memcmp(a.logits.as<float>(), b.logits.as<float>(), a.logits.nbytes())) << "sequence " << i;
    model_->commit(*many[i], 2);
    model_->commit(*alone[i], 2);
  }
  // A sequence twice in one call is refused.
  auto s = model_->new_sequence();
  run_one(*model_, *s, {1, 2, 3}, SpanMode::Prefill);
  run_one(*model_, *s, {4, 5}, SpanMode::Extend);
  const std::vector<std::pair<SequenceState*, int64_t>> twice = {{s.get(), 1}, {s.get(), 1}};
  EXPECT_THROW(model_->commit_many(twice), Error);
}

TEST_P(RowInvariance, StateMisuseIsRejected) {
  auto s = model_->new_sequence();
  run_one(*model_, *s, {1, 2, 3}, SpanMode::Prefill);
  EXPECT_THROW(model_->commit(*s, 1), Error);  // nothing pending
  run_one(*model_, *s, {4, 5}, SpanMode::Extend);
  EXPECT_THROW(run_one(*model_, *s, {6}, SpanMode::Extend), Error);  // pending rows not committed
  EXPECT_THROW(model_->commit(*s, 3), Error);
  model_->commit(*s, 2);
  EXPECT_EQ(s->length(), 5);
  EXPECT_THROW(run_one(*model_, *s, {static_cast<int32_t>(V())}, SpanMode::Extend), Error);
  ForwardBatch twice;
  const std::vector<int32_t> one = {1};
  twice.spans = {{s.get(), one, SpanMode::Extend, LogitsWanted::All},
                 {s.get(), one, SpanMode::Extend, LogitsWanted::All}};
  EXPECT_THROW(model_->forward(twice), Error);
}

INSTANTIATE_TEST_SUITE_P(Models, RowInvariance,
                         ::testing::Values(Case{"qwen3_untied", "f32"}, Case{"qwen3_5_flat", "f32"},
                                           Case{"qwen3_5_vl", "bf16"}, Case{"qwen3_tied", "bf16"},
                                           Case{"qwen3_untied", "f32", "bf16"}, Case{"qwen3_5_vl", "bf16", "f32"}),
                         [](const auto& i) {
                           return i.param.fixture + "_" + i.param.dtype +
                                  (i.param.kv_dtype == "auto" ? "" : "_kv" + i.param.kv_dtype);
                         });

}  // namespace
}  // namespace specserve

namespace specserve {
namespace {
TEST(ForwardArgmax, ArgmaxSpansGetTheArgmaxOfTheirRows) {
  for (const auto& f : testing::all_fixtures()) {
    SCOPED_TRACE(f);
    auto m = TargetModel::load(testing::fixture_dir(f), {});
    testing::check_forward_argmax(*m);
  }
}
}  // namespace
}  // namespace specserve
