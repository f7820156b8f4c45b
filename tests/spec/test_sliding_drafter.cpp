// Sliding-window drafter layers (docs/DFLASH.md §1.7): causal inside the block and limited to the window
// (a block query at position q sees keys ≥ q − (W − 1), and only block slots ≤ its own), while full
// layers stay bidirectional. The HF reference does not implement this, so the rule itself is tested:
//   - causal: with every layer sliding, slot k's logits do not depend on how many slots follow it
//     (γ = 15 and γ = 3 agree bit for bit on slots 1..3); with full layers they do;
//   - windowed: once the block starts at s ≥ W, no block row can see context row 0, so changing its
//     features changes nothing; below W, or with full layers, it does.
#include "drafter_fixture_edit.h"
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

constexpr int kWindow = 6;

class SlidingDrafter : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = TargetModel::load(pair_dir("dense-trained") + "/target", {.dtype = "f32"});
    const std::string src = pair_dir("dense-trained") + "/draft";
    full_ = DFlashDrafter::load(src, *target_);
    sliding_ = DFlashDrafter::load(edited_drafter(src, "sliding",
                                                  {.config =
                                                       [](nlohmann::json& c) {
                                                         c["layer_types"] = {"sliding_attention", "sliding_attention"};
                                                         c["use_sliding_window"] = true;
                                                         c["sliding_window"] = kWindow;
                                                         c["max_window_layers"] = 0;
                                                       }}),
                                   *target_);
    ASSERT_EQ(sliding_->config().layer_types[0], LayerType::SlidingAttention);
    prompt_ = {4, 9, 14, 19, 24, 29, 34, 39, 44, 49, 54, 59};
    ForwardBatch b;
    auto state = target_->new_sequence();
    b.spans.push_back({state.get(), prompt_, SpanMode::Prefill, LogitsWanted::None});
    b.capture_layers = full_->target_layer_ids();
    ForwardResult r = target_->forward(b);
    features_.assign(r.captured.as<float>(), r.captured.as<float>() + r.captured.numel());
  }

  // Logits of slots 1..gamma for a block at position s, over the first s prompt rows (row 0's
  // features scaled by `row0_scale`).
  std::vector<float> draft(const DFlashDrafter& d, int64_t s, int gamma, float row0_scale = 1.0f) const {
    auto seq = d.new_sequence();
    const auto width = static_cast<size_t>(d.feature_width());
    std::vector<float> f(features_.begin(), features_.begin() + static_cast<ptrdiff_t>(s * width));
    for (size_t i = 0; i < width; ++i) f[i] *= row0_scale;
    append_rows(*seq, 0, f);
    DraftBlock block{seq.get(), prompt_[static_cast<size_t>(s)], s};
    const Tensor t = d.draft_logits(std::span(&block, 1), gamma);
    return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
  }

  std::unique_ptr<TargetModel> target_;
  std::unique_ptr<DFlashDrafter> full_, sliding_;
  std::vector<int32_t> prompt_;
  std::vector<float> features_;
};

TEST_F(SlidingDrafter, SlotsDoNotSeeLaterSlots) {
  const auto V = static_cast<size_t>(target_->vocab_size());
  auto first3 = [&](const std::vector<float>& v) { return std::vector<float>(v.begin(), v.begin() + 3 * V); };
  EXPECT_EQ(first3(draft(*sliding_, 8, 15)), draft(*sliding_, 8, 3));
  EXPECT_NE(first3(draft(*full_, 8, 15)), draft(*full_, 8, 3));  // bidirectional
}

TEST_F(SlidingDrafter, OldContextOutsideTheWindowIsInvisible) {
  EXPECT_EQ(draft(*sliding_, kWindow, 15, 1.0f), draft(*sliding_, kWindow, 15, -3.0f));
  EXPECT_NE(draft(*sliding_, kWindow - 1, 15, 1.0f), draft(*sliding_, kWindow - 1, 15, -3.0f));
  EXPECT_NE(draft(*full_, kWindow, 15, 1.0f), draft(*full_, kWindow, 15, -3.0f));
}

}  // namespace
}  // namespace specserve::spec
