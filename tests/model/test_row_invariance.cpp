// The lossless promise (docs/DESIGN.md §1, docs/DFLASH.md §6.6): extend rows equal successive decodes bit for bit;
// a row's logits and captured features do not depend on the other rows or sequences in the batch;
// prefill does not depend on its batch neighbours (nor on a split at 64-token chunk boundaries).

#include "row_invariance_checks.h"

namespace specserve {
namespace {

using namespace specserve::testing;

struct InvarianceCase {
  std::string fixture;
  std::string dtype;
  std::string kv_dtype = "auto";  // auto: f32 for f32 weights, else bf16
};

class RowInvariance : public ::testing::TestWithParam<InvarianceCase> {
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
  expect_prefill_independent_of_neighbours_and_chunk_splits(*model_);
}

TEST_P(RowInvariance, RollbackEqualsRunThatSawOnlyKeptRows) {
  expect_rollback_equals_run_that_saw_only_kept_rows(*model_);
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
                         ::testing::Values(InvarianceCase{"qwen3_untied", "f32"}, InvarianceCase{"qwen3_5_flat", "f32"},
                                           InvarianceCase{"qwen3_5_vl", "bf16"}, InvarianceCase{"qwen3_tied", "bf16"},
                                           InvarianceCase{"qwen3_untied", "f32", "bf16"},
                                           InvarianceCase{"qwen3_5_vl", "bf16", "f32"}),
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
