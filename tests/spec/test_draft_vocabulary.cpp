// --draft-vocab (spec/draft_vocabulary.h, DFlashDrafter::set_vocabulary): which ids a subset holds;
// that the drafter's logits over it are the whole head's at those ids and -inf elsewhere; that its
// argmax maps back to ids; that drafts never leave it; and that the output is still exactly plain
// decoding's (docs/DESIGN.md §1: drafts only move acceptance).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "spec/draft_vocabulary.h"
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;
using Ids = std::vector<int32_t>;

TEST(DraftVocabulary, TheLowestIdsPlusTheAlwaysDrafted) {
  EXPECT_TRUE(draft_vocabulary("all", {}, 100).empty());
  EXPECT_TRUE(draft_vocabulary("", {}, 100).empty());
  EXPECT_EQ(draft_vocabulary("4", Ids{90, 2, 150, -1, 90}, 100), (Ids{0, 1, 2, 3, 90}));
  EXPECT_TRUE(draft_vocabulary("100", {}, 100).empty());  // every id: the whole head
  EXPECT_TRUE(draft_vocabulary("5000", {}, 100).empty());
  EXPECT_TRUE(draft_vocabulary("99", Ids{99}, 100).empty());  // ... also when `always` completes it
  EXPECT_THROW(draft_vocabulary("0", {}, 100), Error);
  EXPECT_THROW(draft_vocabulary("/nonexistent/ids.txt", {}, 100), Error);
}

TEST(DraftVocabulary, AFileOfIds) {
  const auto path = std::filesystem::temp_directory_path() / ("specserve-draft-vocab-" + std::to_string(getpid()));
  const auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  write("[9, 5, 5, 3]");
  EXPECT_EQ(draft_vocabulary(path.string(), Ids{50}, 100), (Ids{3, 5, 9, 50}));
  write("3\n100\n");
  EXPECT_THROW(draft_vocabulary(path.string(), {}, 100), Error);  // outside the vocabulary
  write("# nothing\n");
  EXPECT_THROW(draft_vocabulary(path.string(), {}, 100), Error);  // no ids
  std::filesystem::remove(path);
}

class DrafterVocabulary : public ::testing::Test {
 protected:
  void SetUp() override { pair_ = std::make_unique<Pair>("dense-trained", "f32"); }

  // One block over a fresh drafter context of the trace's prompt (the sequence lives as long as the
  // test).
  DraftBlock fresh_block(const DFlashDrafter& d) {
    const Trace trace = load_trace("dense-trained");
    auto state = pair_->target->new_sequence();
    ForwardBatch b;
    b.spans.push_back({state.get(), trace.prompt, SpanMode::Prefill, LogitsWanted::None});
    b.capture_layers = d.target_layer_ids();
    const ForwardResult r = pair_->target->forward(b);
    sequences_.push_back(d.new_sequence());
    append_rows(*sequences_.back(), 0,
                std::span<const float>(r.captured.as<float>(), static_cast<size_t>(r.captured.numel())));
    return DraftBlock{sequences_.back().get(), trace.prompt.back(), static_cast<int64_t>(trace.prompt.size())};
  }
  Tensor block_logits(const DFlashDrafter& d, int gamma) {
    const DraftBlock block = fresh_block(d);
    return d.draft_logits(std::span(&block, 1), gamma);
  }
  std::vector<std::unique_ptr<DrafterSequence>> sequences_;
  std::unique_ptr<Pair> pair_;
};

TEST_F(DrafterVocabulary, LogitsAreTheWholeHeadsAtTheSubsetsIds) {
  DFlashDrafter& d = *pair_->drafter;
  const int gamma = 15;
  const Tensor full = block_logits(d, gamma);
  const int64_t V = d.vocab_size();
  Ids ids;
  for (int32_t i = 0; i < V; i += 3) ids.push_back(i);  // every third id: many separate runs
  ids.push_back(static_cast<int32_t>(V - 1));
  d.set_vocabulary(ids);
  EXPECT_EQ(d.head_rows(), static_cast<int64_t>(ids.size()));
  // Padded to 64 rows (an aligned pitch for the logits).
  EXPECT_EQ(d.head_bytes(), (ids.size() + 63) / 64 * 64 * static_cast<size_t>(d.config().hidden_size) * sizeof(float));
  const Tensor sub = block_logits(d, gamma);
  ASSERT_EQ(sub.shape(), full.shape());
  std::vector<bool> in(static_cast<size_t>(V), false);
  for (int32_t id : ids) in[static_cast<size_t>(id)] = true;
  for (int64_t r = 0; r < gamma; ++r)
    for (int64_t j = 0; j < V; ++j) {
      const float got = sub.as<float>()[r * V + j];
      if (in[static_cast<size_t>(j)])
        ASSERT_EQ(got, full.as<float>()[r * V + j]) << "row " << r << " id " << j;  // a column's dot product
      else
        ASSERT_TRUE(std::isinf(got) && got < 0) << "row " << r << " id " << j;
    }
  d.set_vocabulary({});  // back to the whole head
  EXPECT_EQ(d.head_rows(), V);
  EXPECT_EQ(block_logits(d, gamma).view().nbytes(), full.view().nbytes());
  const Tensor again = block_logits(d, gamma);
  EXPECT_TRUE(std::equal(again.as<float>(), again.as<float>() + again.view().numel(), full.as<float>()));
  EXPECT_THROW(d.set_vocabulary({3, 2}), Error);                     // not ascending
  EXPECT_THROW(d.set_vocabulary({1, 1}), Error);                     // not unique
  EXPECT_THROW(d.set_vocabulary({static_cast<int32_t>(V)}), Error);  // outside
}

TEST_F(DrafterVocabulary, ArgmaxMapsBackToIdsBelowTheColumns) {
  DFlashDrafter& d = *pair_->drafter;
  const int gamma = 15;
  Ids ids;
  for (int32_t i = 0; i < 200; ++i) ids.push_back(i);
  ids.push_back(382);  // EOS: above the argmax's columns below
  d.set_vocabulary(ids);
  const Tensor logits = block_logits(d, gamma);
  const DraftBlock block = fresh_block(d);
  for (int64_t columns : {int64_t{300}, d.vocab_size()}) {
    const std::vector<int32_t> got = d.draft_argmax(std::span(&block, 1), gamma, gamma, columns);
    ASSERT_EQ(got.size(), static_cast<size_t>(gamma));
    for (int k = 0; k < gamma; ++k) {
      const float* row = logits.as<float>() + k * d.vocab_size();
      const int32_t want = static_cast<int32_t>(std::max_element(row, row + columns) - row);
      EXPECT_EQ(got[static_cast<size_t>(k)], want) << "slot " << k + 1 << ", columns " << columns;
      EXPECT_TRUE(want < 200 || want == 382);
    }
  }
}

TEST_F(DrafterVocabulary, OutputIsPlainDecodingsAndDraftsStayInTheSubset) {
  const Trace trace = load_trace("dense-trained");
  const std::vector<std::vector<int32_t>> prompts = {trace.prompt, {7, 12, 17, 22, 27, 32, 37, 42}, {5, 9, 5}};
  Ids ids;
  for (int32_t i = 0; i < 192; ++i) ids.push_back(i);  // half of the 384 ids
  pair_->drafter->set_vocabulary(ids);
  for (const bool sampled : {false, true}) {
    std::vector<engine::GenerationRequest> plain_reqs, spec_reqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      plain_reqs.push_back(sampled ? sampled_request(prompts[i], 40, 7 + i) : greedy_request(prompts[i], 40));
      spec_reqs.push_back(sampled ? sampled_request(prompts[i], 40, 7 + i) : greedy_request(prompts[i], 40));
    }
    auto plain_engine = make_engine(*pair_->target, nullptr);
    const auto plain = run_all(*plain_engine, std::move(plain_reqs));
    DFlashProposer proposer(*pair_->drafter, {.gamma = 15});
    auto spec_engine = make_engine(*pair_->target, &proposer);
    const auto spec = run_all(*spec_engine, std::move(spec_reqs));
    int accepted = 0, outside = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(plain[i].error.empty() && spec[i].error.empty()) << plain[i].error << spec[i].error;
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "prompt " << i << (sampled ? ", seeded T = 1" : ", T = 0");
      for (const auto& s : spec[i].steps) {
        accepted += s.accepted;
        for (int32_t t : s.drafts) EXPECT_LT(t, 192) << "a draft outside the subset";
      }
      for (int32_t t : plain[i].tokens) outside += t >= 192;
    }
    EXPECT_GT(accepted, 0);  // it still speculates
    ::testing::Test::RecordProperty(sampled ? "sampled_outside" : "greedy_outside", outside);
  }
}

TEST_F(DrafterVocabulary, SampledDraftsHaveNoMassOutsideTheSubset) {
  Ids ids;
  for (int32_t i = 0; i < 100; ++i) ids.push_back(i);
  pair_->drafter->set_vocabulary(ids);
  DFlashProposer proposer(*pair_->drafter, {.gamma = 7, .selection = {DraftSampling::Sample, false}});
  auto engine = make_engine(*pair_->target, &proposer);
  std::vector<engine::GenerationRequest> reqs;
  reqs.push_back(sampled_request({7, 12, 17, 22, 27, 32, 37, 42}, 24, 3));
  const auto runs = run_all(*engine, std::move(reqs));
  ASSERT_TRUE(runs[0].error.empty()) << runs[0].error;
  EXPECT_EQ(runs[0].tokens.size(), 24u);
  for (const auto& s : runs[0].steps)
    for (int32_t t : s.drafts) EXPECT_LT(t, 100);
}

}  // namespace
}  // namespace specserve::spec
