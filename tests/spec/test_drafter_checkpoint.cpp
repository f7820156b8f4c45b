// Loading z-lab drafter checkpoints (docs/DFLASH.md §2): `model.`-prefixed names load the same drafter;
// DFlash2 / DSpark tensors, non-drafter configs and every kind of mismatched target are refused with
// an error that says what is wrong (a wrong pair would otherwise load and silently accept nothing).
#include "drafter_fixture_edit.h"
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class DrafterCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { target_ = TargetModel::load(pair_dir("dense-trained") + "/target", {.dtype = "f32"}); }
  std::string draft_dir() const { return pair_dir("dense-trained") + "/draft"; }
  TargetShape shape() const {
    return {target_->hidden_size(), target_->vocab_size(), target_->embedding_table().dim(0),
            target_->config().num_layers};
  }
  std::unique_ptr<TargetModel> target_;
};

Tensor drafts_of(const DFlashDrafter& d, TargetModel& target) {
  auto seq = d.new_sequence();
  auto state = target.new_sequence();
  const std::vector<int32_t> prompt = {5, 9, 13, 17, 21};
  ForwardBatch b;
  b.spans.push_back({state.get(), prompt, SpanMode::Prefill, LogitsWanted::None});
  b.capture_layers = d.target_layer_ids();
  ForwardResult r = target.forward(b);
  append_rows(*seq, 0, std::span<const float>(r.captured.as<float>(), static_cast<size_t>(r.captured.numel())));
  DraftBlock block{seq.get(), 25, 5};
  return d.draft_logits(std::span(&block, 1), d.block_size() - 1);
}

TEST_F(DrafterCheckpointTest, ModelPrefixedNamesLoadTheSameDrafter) {
  const std::string dir =
      edited_drafter(draft_dir(), "prefixed", {.rename = [](const std::string& n) { return "model." + n; }});
  auto prefixed = DFlashDrafter::load(dir, *target_, "f32");
  auto plain = DFlashDrafter::load(draft_dir(), *target_, "f32");
  const Tensor a = drafts_of(*prefixed, *target_), b = drafts_of(*plain, *target_);
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_TRUE(std::equal(a.as<float>(), a.as<float>() + a.numel(), b.as<float>()));
}

TEST_F(DrafterCheckpointTest, RefusesDFlash2AndDSparkTensors) {
  const Tensor extra = Tensor::zeros(DType::F32, {4});
  const std::string d2 = edited_drafter(
      draft_dir(), "dflash2", {.add = [&](SafetensorsWriter& w) { w.add("layers.0.attention_conv.weight", extra); }});
  EXPECT_NE(error_of([&] { DFlashDrafter::load(d2, *target_); }).find("DFlash2"), std::string::npos);
  const std::string ds = edited_drafter(
      draft_dir(), "dspark", {.add = [&](SafetensorsWriter& w) { w.add("markov_head.markov_w1.weight", extra); }});
  EXPECT_NE(error_of([&] { DFlashDrafter::load(ds, *target_); }).find("DSpark"), std::string::npos);
}

TEST_F(DrafterCheckpointTest, RefusesATargetCheckpointAsDrafter) {
  const std::string e = error_of([&] { DFlashDrafter::load(pair_dir("dense-trained") + "/target", *target_); });
  EXPECT_NE(e.find("not a DFlash drafter"), std::string::npos) << e;
}

TEST_F(DrafterCheckpointTest, RefusesMismatchedTargets) {
  auto refuse = [&](TargetShape t, const std::string& needle) {
    const std::string e = error_of([&] { DrafterCheckpoint::load(draft_dir(), t, "f32"); });
    EXPECT_NE(e.find(needle), std::string::npos) << "want '" << needle << "', got: " << e;
  };
  ASSERT_NO_THROW(DrafterCheckpoint::load(draft_dir(), shape(), "f32"));
  TargetShape t = shape();
  t.hidden = 256;
  refuse(t, "hidden_size");
  t = shape();
  t.vocab = 512;
  refuse(t, "vocab_size");
  t = shape();
  t.num_layers = 4;
  refuse(t, "num_target_layers");
  t = shape();
  t.embedding_rows = 300;
  refuse(t, "mask_token_id");
  // The dense drafter (taps [1, 3, 4] of a 6-layer target) against the 4-layer hybrid target.
  auto hybrid = TargetModel::load(pair_dir("hybrid-trained") + "/target", {.dtype = "f32"});
  EXPECT_THROW(DFlashDrafter::load(draft_dir(), *hybrid), Error);
}

TEST_F(DrafterCheckpointTest, RefusesFcOfTheWrongWidthAndTapsPastTheTarget) {
  // Two taps declared, but fc was trained on three: fc.weight is [H, 3H], not [H, 2H].
  const std::string two = edited_drafter(draft_dir(), "twotaps", {.config = [](nlohmann::json& c) {
                                           c["dflash_config"]["target_layer_ids"] = {1, 3};
                                         }});
  const std::string e = error_of([&] { DFlashDrafter::load(two, *target_); });
  EXPECT_NE(e.find("fc.weight"), std::string::npos) << e;
  // A tap at layer 6 of a 6-layer target (no num_target_layers in the config to catch it earlier).
  const std::string past = edited_drafter(draft_dir(), "pasttap", {.config = [](nlohmann::json& c) {
                                            c.erase("num_target_layers");
                                            c["dflash_config"]["target_layer_ids"] = {1, 3, 6};
                                          }});
  const std::string e2 = error_of([&] { DFlashDrafter::load(past, *target_); });
  EXPECT_NE(e2.find("target_layer_ids holds 6"), std::string::npos) << e2;
}

TEST_F(DrafterCheckpointTest, GammaMustFitTheBlock) {
  auto d = DFlashDrafter::load(draft_dir(), *target_);
  EXPECT_THROW(DFlashProposer(*d, {.gamma = 16}), Error);
  EXPECT_THROW(DFlashProposer(*d, {.gamma = -1}), Error);
  EXPECT_EQ(DFlashProposer(*d, {.gamma = 1}).gamma(), 1);
  EXPECT_EQ(DFlashProposer(*d).gamma(), 15);
  EXPECT_EQ(DFlashProposer(*d).capture_layers(), (std::vector<int>{1, 3, 4}));
}

}  // namespace
}  // namespace specserve::spec
