// Qwen block-128 fp8 checkpoints end to end on the CPU (docs/MODELS.md §6). Each transformers fixture is
// quantised here (tests/model/fp8_checkpoint_writer.h) — dense untied and tied, hybrid flat and
// vision-language (sharded), with F32, F16 and BF16 scales — and loaded: with --dtype f32 every quantised
// weight is the dequantised value bit for bit and the logits (prefill, decode, extend) are bit for bit those
// of the same model stored as f32 dequantised weights; the default dtype is bf16, equal bit for bit to that
// f32 model stored as bf16; with --fp8-weights keep the weights stay fp8 and the logits are still those
// bits, and extend rows equal decode rows.
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../specserve_cli.h"
#include "fp8_checkpoint_writer.h"
#include "model/weights.h"
#include "model_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

struct Case {
  std::string fixture;
  DType scale_dtype;
  uint64_t shard_bytes;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.fixture << " with " << dtype_name(c.scale_dtype) << " scales" << (c.shard_bytes ? ", sharded" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.fixture + "_" + std::string(dtype_name(info.param.scale_dtype)) + "_scales";
}

class Fp8Checkpoint : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    fp8_ = std::make_unique<ScratchDir>("fp8");
    dequantized_ = std::make_unique<ScratchDir>("dequantized");
    pair_ = write_fp8_pair(fixture_dir(GetParam().fixture), fp8_->path(), dequantized_->path(), GetParam().scale_dtype,
                           GetParam().shard_bytes);
  }
  std::unique_ptr<ScratchDir> fp8_, dequantized_;
  Fp8Pair pair_;
};

TEST_P(Fp8Checkpoint, LoadsTheDequantisedWeightsBitForBit) {
  ASSERT_FALSE(pair_.quantized.empty());
  const auto reference = Checkpoint::open(dequantized_->path(), MapAdvice::Normal);
  // The quantiser itself: each dequantised weight is within half an e4m3 step (1/16 relative, 2^-10 × the
  // scale for subnormals) of the original, give or take the scale's own rounding to F16 / BF16.
  const auto source = Checkpoint::open(fixture_dir(GetParam().fixture), MapAdvice::Normal);
  const auto fp8 = Checkpoint::open(fp8_->path(), MapAdvice::Normal);
  for (const auto& name : pair_.quantized) {
    const Tensor original = to_f32(source->get(name)), scale = to_f32(fp8->get(fp8_scale_name(name)));
    const TensorView deq = reference->get(name);
    const int64_t cols = deq.dim(1);
    for (int64_t i = 0; i < deq.numel(); ++i) {
      const float w = original.as<float>()[i],
                  s = scale.as<float>()[(i / cols / 128) * scale.view().dim(1) + (i % cols) / 128];
      ASSERT_LE(std::fabs(deq.as<const float>()[i] - w), std::fabs(w) / 16 * 1.01f + s * 0x1p-10f) << name << " " << i;
    }
  }
  WeightStore f32(Checkpoint::open(fp8_->path()), DType::F32);
  WeightStore bf16(Checkpoint::open(fp8_->path()), DType::BF16);
  for (const auto& name : pair_.quantized) {
    const TensorView want = reference->get(name);
    EXPECT_TRUE(same_bits(f32.matrix(name, want.shape), want)) << name;
    EXPECT_TRUE(same_bits(bf16.matrix(name, want.shape), from_f32(want, DType::BF16))) << name;
  }
}

TEST_P(Fp8Checkpoint, F32LogitsEqualTheDequantisedModel) {
  auto fp8 = TargetModel::load(fp8_->path(), {.dtype = "f32"});
  auto dequantized = TargetModel::load(dequantized_->path(), {.dtype = "f32"});
  EXPECT_EQ(fp8->weight_dtype(), DType::F32);
  const auto prompt = Reference(fixture_dir(GetParam().fixture)).ids("prompt_ids");
  expect_same_logits(*fp8, *dequantized, prompt);

  // Not a parity claim: how far e4m3 weights move the transformers fp32 logits of the original fixture.
  auto seq = fp8->new_sequence();
  const ForwardResult r = run_one(*fp8, *seq, prompt, SpanMode::Prefill);
  const Reference reference(fixture_dir(GetParam().fixture));
  const TensorView original = reference.f32("prompt_logits");
  const int64_t V = fp8->vocab_size();
  double worst = 0;
  for (size_t p = 0; p < prompt.size(); ++p)
    worst = std::max(worst, rel_err(r.logits.as<float>() + p * V, original.as<const float>() + p * V, V));
  std::printf("  %s: fp8 prompt logits vs the original fp32 model: max rel err %.3g\n", GetParam().fixture.c_str(),
              worst);
}

TEST_P(Fp8Checkpoint, DefaultDtypeIsBf16OfTheDequantisedWeights) {
  auto fp8 = TargetModel::load(fp8_->path(), {});
  auto dequantized = TargetModel::load(dequantized_->path(), {.dtype = "bf16"});
  EXPECT_EQ(fp8->weight_dtype(), DType::BF16);
  expect_same_logits(*fp8, *dequantized, Reference(fixture_dir(GetParam().fixture)).ids("prompt_ids"));
}

// --fp8-weights keep: the Linear weights stay e4m3 with their scales (half the bytes of their bf16 copies)
// and the forward has the bits of the bf16 dequantised model (backend/ops.h, Ops::matmul), so prefill,
// decode and extend logits equal those of the dequantised twin stored as bf16, bit for bit. With --dtype
// f32 (the exact reference) they are dequantised whatever the flag says.
TEST_P(Fp8Checkpoint, KeptWeightsGiveTheBf16DequantisedLogitsBitForBit) {
  auto kept = TargetModel::load(fp8_->path(), {.fp8_weights = "keep"});
  auto dequantised = TargetModel::load(fp8_->path(), {});
  auto twin = TargetModel::load(dequantized_->path(), {.dtype = "bf16"});
  EXPECT_EQ(kept->weight_dtype(), DType::BF16);
  // The kept model streams fewer bytes per step: the fp8 codes (1 byte) and f32 scales instead of bf16.
  EXPECT_LT(kept->step_weight_bytes(), dequantised->step_weight_bytes());
  expect_same_logits(*kept, *twin, Reference(fixture_dir(GetParam().fixture)).ids("prompt_ids"));
  auto f32_kept = TargetModel::load(fp8_->path(), {.dtype = "f32", .fp8_weights = "keep"});
  auto f32_twin = TargetModel::load(dequantized_->path(), {.dtype = "f32"});
  EXPECT_EQ(f32_kept->step_weight_bytes(), f32_twin->step_weight_bytes());
  expect_same_logits(*f32_kept, *f32_twin, Reference(fixture_dir(GetParam().fixture)).ids("prompt_ids"));
  EXPECT_THROW(TargetModel::load(fp8_->path(), {.fp8_weights = "fp8"}), Error);
}

// Verify rows equal decode rows with kept fp8 weights (what makes speculative decoding equal plain decoding,
// docs/DESIGN.md §1.1): an extend of 6 rows against 6 successive decodes, bit for bit.
TEST_P(Fp8Checkpoint, KeptWeightsKeepExtendRowsEqualToDecodeRows) {
  auto m = TargetModel::load(fp8_->path(), {.fp8_weights = "keep"});
  const auto prompt = Reference(fixture_dir(GetParam().fixture)).ids("prompt_ids");
  const std::vector<int32_t> next{5, 9, 2, 6, 5, 3};
  auto a = m->new_sequence(), b = m->new_sequence();
  run_one(*m, *a, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(*m, *b, prompt, SpanMode::Prefill, LogitsWanted::None);
  const ForwardResult extend = run_one(*m, *a, next, SpanMode::Extend);
  for (size_t i = 0; i < next.size(); ++i) {
    const ForwardResult one = run_one(*m, *b, {next[i]}, SpanMode::Extend);
    m->commit(*b, 1);
    ASSERT_EQ(row(one.logits, 0), row(extend.logits, static_cast<int64_t>(i))) << "row " << i;
  }
}

// The commands: `generate` gives the dequantised model's greedy tokens (--dtype f32) and, by default, those of
// its bf16 storage; `info` reports the quantised share.
TEST_P(Fp8Checkpoint, GenerateAndInfoCommands) {
  const std::string prompt = join_ids(Reference(fixture_dir(GetParam().fixture)).ids("prompt_ids"));
  const auto tokens = [&](const std::string& dir, const std::string& dtype) {
    const CliRun r = run_specserve("generate --model " + dir + " --prompt-ids " + prompt +
                                   " --max-tokens 12 --ignore-eos --json --threads 2" + dtype);
    EXPECT_EQ(r.status, 0) << r.out;
    return r.status == 0 ? nlohmann::json::parse(r.out).at("token_ids") : nlohmann::json();
  };
  EXPECT_EQ(tokens(fp8_->path(), " --dtype f32"), tokens(dequantized_->path(), " --dtype f32"));
  EXPECT_EQ(tokens(fp8_->path(), ""), tokens(dequantized_->path(), " --dtype bf16"));
  EXPECT_EQ(tokens(fp8_->path(), " --fp8-weights keep"), tokens(dequantized_->path(), " --dtype bf16"));
  const CliRun info = run_specserve("info --model " + fp8_->path());
  ASSERT_EQ(info.status, 0);
  EXPECT_NE(info.out.find("fp8 block-128: " + std::to_string(pair_.quantized.size()) + " tensors, "), std::string::npos)
      << info.out;
}

// A checkpoint whose codes hold an e4m3 NaN code (0x7F / 0xFF: no weight value, never written by a quantiser)
// is refused at load with one line naming the tensor, the code and its element, whether the weights are
// dequantised (the default, --dtype f32) or kept fp8 (--fp8-weights keep), instead of computing NaN on the
// CPU and ±480 × scale on the GPU.
TEST(Fp8CheckpointCodes, NaNCodesAreRefusedAtLoad) {
  ScratchDir fp8("nan"), dequantized("nan-deq");
  const Fp8Pair pair = write_fp8_pair(fixture_dir("qwen3_untied"), fp8.path(), dequantized.path(), DType::BF16, 0);
  ASSERT_FALSE(pair.quantized.empty());
  const std::string name = pair.quantized.back(), file = fp8.path() + "/model.safetensors";
  int64_t cols = 0, at = 0;
  {  // the safetensors layout: 8-byte header length, the JSON header, then the data
    const auto c = Checkpoint::open(fp8.path(), MapAdvice::Normal);
    cols = c->get(name).dim(1);
    at = 2 * cols + 5;  // row 2, column 5
    std::ifstream in(file, std::ios::binary);
    uint64_t header = 0;
    in.read(reinterpret_cast<char*>(&header), 8);
    std::string text(header, '\0');
    in.read(text.data(), static_cast<std::streamsize>(header));
    const int64_t start = nlohmann::json::parse(text).at(name).at("data_offsets").at(0).get<int64_t>();
    std::fstream out(file, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(8 + header + start + at));
    out.put(static_cast<char>(0xff));
  }
  const std::string want = "'" + name + "' holds the e4m3 NaN code 0xFF at row 2, column 5";
  for (const LoadOptions& o : {LoadOptions{}, LoadOptions{.dtype = "f32"}, LoadOptions{.fp8_weights = "keep"}}) {
    try {
      TargetModel::load(fp8.path(), o);
      ADD_FAILURE() << "loaded a checkpoint with a NaN code";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8Checkpoint,
                         ::testing::Values(Case{"qwen3_untied", DType::F32, 0}, Case{"qwen3_tied", DType::F16, 0},
                                           Case{"qwen3_5_flat", DType::BF16, 0},
                                           Case{"qwen3_5_vl", DType::F32, 200'000}),
                         case_name);

}  // namespace
}  // namespace specserve
