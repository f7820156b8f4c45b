// The drafter is row-invariant like everything on the decode path (docs/DESIGN.md §1): a sequence's draft
// logits are the same bits whether its block runs alone or beside other sequences' blocks and
// context rows, and whether its context rows were projected eagerly (during a long prefill) or
// together with the block.
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

class DrafterBatching : public ::testing::Test {
 protected:
  void SetUp() override { pair_ = std::make_unique<Pair>("hybrid-trained", "f32"); }

  // Target features of `prompt` (all rows).
  std::vector<float> features(const std::vector<int32_t>& prompt) {
    auto state = pair_->target->new_sequence();
    ForwardBatch b;
    b.spans.push_back({state.get(), prompt, SpanMode::Prefill, LogitsWanted::None});
    b.capture_layers = pair_->drafter->target_layer_ids();
    ForwardResult r = pair_->target->forward(b);
    return std::vector<float>(r.captured.as<float>(), r.captured.as<float>() + r.captured.numel());
  }
  static std::vector<float> rows_of(const Tensor& t, int64_t first, int64_t n) {
    const int64_t w = t.shape()[1];
    return std::vector<float>(t.as<float>() + first * w, t.as<float>() + (first + n) * w);
  }
  std::unique_ptr<Pair> pair_;
};

TEST_F(DrafterBatching, BlockAloneEqualsBlockAmongOthers) {
  const DFlashDrafter& d = *pair_->drafter;
  const std::vector<int32_t> pa = {130, 66, 172, 183, 18, 130, 66}, pb = {5, 9, 5}, pc(40, 77);
  const auto fa = features(pa), fb = features(pb), fc = features(pc);
  const int gamma = 15;

  auto alone = d.new_sequence();
  append_rows(*alone, 0, fa);
  DraftBlock one{alone.get(), 172, 7};
  const Tensor solo = d.draft_logits(std::span(&one, 1), gamma);

  auto a = d.new_sequence(), b = d.new_sequence(), c = d.new_sequence();
  append_rows(*a, 0, fa);
  append_rows(*b, 0, fb);
  append_rows(*c, 0, fc);
  const DraftBlock three[] = {{b.get(), 9, 3}, {a.get(), 172, 7}, {c.get(), 77, 40}};
  const Tensor batched = d.draft_logits(three, gamma);
  EXPECT_EQ(rows_of(batched, gamma, gamma), rows_of(solo, 0, gamma));
  EXPECT_EQ(a->projected(), 7);
  EXPECT_EQ(a->waiting_rows(), 0);
}

// A block that asks for fewer output slots (DraftBlock::slots: a sequence drafting fewer than the most)
// gets the first of the same rows, packed after the blocks before it: the block itself stays whole.
TEST_F(DrafterBatching, FewerOutputSlotsAreTheFirstRowsOfTheWholeBlock) {
  const DFlashDrafter& d = *pair_->drafter;
  const std::vector<int32_t> pa = {130, 66, 172, 183, 18, 130, 66}, pb = {5, 9, 5};
  const auto fa = features(pa), fb = features(pb);
  const int gamma = 15;
  auto a = d.new_sequence(), b = d.new_sequence();
  append_rows(*a, 0, fa);
  append_rows(*b, 0, fb);
  const DraftBlock whole[] = {{a.get(), 172, 7}, {b.get(), 9, 3}};
  const Tensor all = d.draft_logits(whole, gamma);
  const DraftBlock fewer[] = {{a.get(), 172, 7, 3}, {b.get(), 9, 3, 1}};
  const Tensor some = d.draft_logits(fewer, gamma);
  ASSERT_EQ(some.shape()[0], 4);
  EXPECT_EQ(rows_of(some, 0, 3), rows_of(all, 0, 3));
  EXPECT_EQ(rows_of(some, 3, 1), rows_of(all, gamma, 1));
  // The argmax path packs them the same way.
  const std::vector<int32_t> ids_all = d.draft_argmax(whole, gamma, gamma, d.vocab_size());
  const std::vector<int32_t> ids_some = d.draft_argmax(fewer, gamma, gamma, d.vocab_size());
  ASSERT_EQ(ids_some.size(), 4u);
  EXPECT_EQ(ids_some, (std::vector<int32_t>{ids_all[0], ids_all[1], ids_all[2], ids_all[15]}));
}

TEST_F(DrafterBatching, EagerContextProjectionGivesTheSameDrafts) {
  const DFlashDrafter& d = *pair_->drafter;
  const std::vector<int32_t> prompt(50, 130);
  const auto f = features(prompt);
  const auto width = static_cast<size_t>(d.feature_width());

  auto lazy = d.new_sequence();
  append_rows(*lazy, 0, f);  // all 50 rows projected with the block
  auto eager = d.new_sequence();
  for (size_t r = 0; r < prompt.size(); r += 16) {  // chunks projected as they arrive
    const size_t n = std::min<size_t>(16, prompt.size() - r);
    append_rows(*eager, static_cast<int64_t>(r), std::span(f).subspan(r * width, n * width));
    DrafterSequence* s[] = {eager.get()};
    d.project_context(s);
  }
  EXPECT_EQ(eager->projected(), 50);
  DraftBlock bl{lazy.get(), 66, 50}, be{eager.get(), 66, 50};
  const Tensor x = d.draft_logits(std::span(&bl, 1), 15), y = d.draft_logits(std::span(&be, 1), 15);
  EXPECT_EQ(rows_of(x, 0, 15), rows_of(y, 0, 15));
}

// Waiting rows share pages (spec/drafter_sequence.h): a sequence appending one row a step (a plain decode
// row) takes a buffer per kWaitingPageRows steps, and the rows are the same whatever the pages: its K/V
// once projected and its drafts equal those of the rows appended at once.
TEST_F(DrafterBatching, WaitingRowsSharePagesAndProjectTheSame) {
  const DFlashDrafter& d = *pair_->drafter;
  const std::vector<int32_t> prompt(40, 66);
  const auto f = features(prompt);
  const auto width = static_cast<size_t>(d.feature_width());
  constexpr int64_t kPage = DrafterSequence::kWaitingPageRows;

  auto whole = d.new_sequence();
  append_rows(*whole, 0, f);
  ASSERT_EQ(whole->waiting_features().size(), 1u);  // 40 rows at once: a page of their own count
  EXPECT_EQ(whole->waiting_features()[0].used, 40);

  auto steps = d.new_sequence();
  append_rows(*steps, 0, std::span(f).first(3 * width));  // a short prompt: a page of kPage rows
  for (size_t r = 3; r < prompt.size(); ++r)              // then one row a step
    append_rows(*steps, static_cast<int64_t>(r), std::span(f).subspan(r * width, width));
  EXPECT_EQ(steps->waiting_rows(), 40);
  ASSERT_EQ(static_cast<int64_t>(steps->waiting_features().size()), (40 + kPage - 1) / kPage);
  for (const auto& page : steps->waiting_features()) EXPECT_EQ(page.rows.shape()[0], kPage);
  EXPECT_EQ(steps->waiting_features().back().used, 40 % kPage);

  // More rows than the last page has room for: its room first, the rest on a new page.
  auto split = d.new_sequence();
  append_rows(*split, 0, std::span(f).first(5 * width));
  append_rows(*split, 5, std::span(f).subspan(5 * width, 35 * width));
  ASSERT_EQ(split->waiting_features().size(), 2u);
  EXPECT_EQ(split->waiting_features()[0].used, kPage);
  EXPECT_EQ(split->waiting_features()[1].used, 40 - kPage);
  EXPECT_EQ(split->waiting_features()[1].rows.shape()[0], 40 - kPage);

  DraftBlock bw{whole.get(), 130, 40}, bs{steps.get(), 130, 40}, bp{split.get(), 130, 40};
  const Tensor x = d.draft_logits(std::span(&bw, 1), 15), y = d.draft_logits(std::span(&bs, 1), 15),
               z = d.draft_logits(std::span(&bp, 1), 15);
  EXPECT_EQ(rows_of(x, 0, 15), rows_of(y, 0, 15));
  EXPECT_EQ(rows_of(x, 0, 15), rows_of(z, 0, 15));
  EXPECT_EQ(steps->projected(), 40);
  EXPECT_TRUE(steps->waiting_features().empty());
}

// Several sequences' rows in one append_many (the engine's append_contexts) are the rows appended one
// by one: the same drafts; a row out of position order is refused and leaves the sequence as it was.
TEST_F(DrafterBatching, AppendManyEqualsAppendsOneByOne) {
  const DFlashDrafter& d = *pair_->drafter;
  const std::vector<int32_t> pa = {130, 66, 172, 183, 18, 130, 66}, pb = {5, 9, 5};
  const auto fa = features(pa), fb = features(pb);
  const auto width = static_cast<int64_t>(d.feature_width());
  auto view = [&](const std::vector<float>& f) {
    return TensorView::contiguous(const_cast<float*>(f.data()), DType::F32,
                                  {static_cast<int64_t>(f.size()) / width, width});
  };
  auto a1 = d.new_sequence(), b1 = d.new_sequence(), a2 = d.new_sequence(), b2 = d.new_sequence();
  append_rows(*a1, 0, view(fa));
  append_rows(*b1, 0, view(fb));
  const DrafterSequence::Append both[] = {{a2.get(), 0, view(fa)}, {b2.get(), 0, view(fb)}};
  DrafterSequence::append_many(both);
  EXPECT_EQ(a2->rows(), 7);
  EXPECT_EQ(b2->rows(), 3);
  const DraftBlock one[] = {{a1.get(), 172, 7}, {b1.get(), 9, 3}}, many[] = {{a2.get(), 172, 7}, {b2.get(), 9, 3}};
  const Tensor x = d.draft_logits(one, 15), y = d.draft_logits(many, 15);
  EXPECT_EQ(rows_of(x, 0, 30), rows_of(y, 0, 30));

  // A refused call queues nothing, not even the rows checked before the bad one.
  auto c = d.new_sequence(), e = d.new_sequence();
  const DrafterSequence::Append gap[] = {{e.get(), 0, view(fa)}, {c.get(), 2, view(fb)}};
  EXPECT_THROW(DrafterSequence::append_many(gap), Error);
  EXPECT_EQ(c->rows(), 0);
  EXPECT_EQ(e->rows(), 0);
  const DrafterSequence::Append twice[] = {{e.get(), 0, view(fa)}, {e.get(), 7, view(fb)}};
  EXPECT_THROW(DrafterSequence::append_many(twice), Error);
  EXPECT_EQ(e->rows(), 0);
  // The refused calls leave nothing behind: the same sequences append in the next call.
  const DrafterSequence::Append again[] = {{e.get(), 0, view(fa)}, {c.get(), 0, view(fb)}};
  DrafterSequence::append_many(again);
  EXPECT_EQ(e->rows(), 7);
  EXPECT_EQ(c->rows(), 3);
}

// The proposer's append_contexts projects every sequence whose waiting rows reached max_waiting_rows in the
// same call, together (the sequences that started together reach it in the same step), leaves the others
// waiting, and the drafts are those of rows projected with the block.
TEST_F(DrafterBatching, ProposerProjectsTheLongWaitsTogether) {
  const DFlashDrafter& d = *pair_->drafter;
  const std::vector<int32_t> pa = {130, 66, 172, 183, 18, 130, 66}, pb = {5, 9, 5}, pc = {7, 7, 8, 9, 11};
  const auto fa = features(pa), fb = features(pb), fc = features(pc);
  const auto width = static_cast<int64_t>(d.feature_width());
  auto view = [&](const std::vector<float>& f) {
    return TensorView::contiguous(const_cast<float*>(f.data()), DType::F32,
                                  {static_cast<int64_t>(f.size()) / width, width});
  };
  DFlashProposerOptions o;
  o.gamma = 15;
  o.max_waiting_rows = 4;
  DFlashProposer proposer(d, o);
  auto ca = proposer.new_context(), cb = proposer.new_context(), cc = proposer.new_context();
  const engine::DraftProposer::ContextRows rows[] = {
      {ca.get(), 0, pa, view(fa)}, {cb.get(), 0, pb, view(fb)}, {cc.get(), 0, pc, view(fc)}};
  proposer.append_contexts(rows);
  DrafterSequence *a = DFlashProposer::sequence_of(*ca), *b = DFlashProposer::sequence_of(*cb),
                  *c = DFlashProposer::sequence_of(*cc);
  EXPECT_EQ(a->waiting_rows(), 0);
  EXPECT_EQ(a->projected(), 7);
  EXPECT_EQ(b->waiting_rows(), 3);  // below the limit: projected with its next block
  EXPECT_EQ(c->waiting_rows(), 0);
  EXPECT_EQ(c->projected(), 5);

  auto la = d.new_sequence(), lc = d.new_sequence();
  append_rows(*la, 0, view(fa));
  append_rows(*lc, 0, view(fc));
  const DraftBlock eager[] = {{a, 172, 7}, {c, 11, 5}}, lazy[] = {{la.get(), 172, 7}, {lc.get(), 11, 5}};
  const Tensor x = d.draft_logits(eager, 15), y = d.draft_logits(lazy, 15);
  EXPECT_EQ(rows_of(x, 0, 30), rows_of(y, 0, 30));
}

}  // namespace
}  // namespace specserve::spec
