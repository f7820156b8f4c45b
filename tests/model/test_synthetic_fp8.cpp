// The synthetic fp8 shapes (`bench steps --synthetic qwen3-8b-fp8 | qwen3.6-27b-fp8 | tiny-fp8`,
// model/synthetic_shapes.h): the plain shapes with the target's Linear weights made as e4m3 codes + f32
// block-128 scales and kept so, as `--fp8-weights keep` keeps a real fp8 checkpoint's (docs/MODELS.md §6.1);
// the bench's byte counts count them at one byte an element plus scales, beside the bf16 step's.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "../specserve_cli.h"
#include "backend/memory.h"
#include "backend/synthetic_fill.h"
#include "io/fp8_blocks.h"
#include "model/synthetic_shapes.h"
#include "model/weights.h"
#include "model_test_util.h"

namespace specserve::testing {
namespace {

// The device fill's e4m3 conversion (backend/synthetic_fill.h, shared with CUDA) is core/dtype.h's, code for
// code: over ±448 (every exponent) and over ±0.03 (the subnormals and the smallest normals).
TEST(SyntheticFp8, FillCodesAreTheRoundedUniformValues) {
  const size_t n = 200000;
  std::vector<uint8_t> codes(n);
  for (const float range : {448.0f, 0.03f}) {
    cpu_memory().fill_uniform(codes.data(), DType::F8_E4M3, n, 42, -range, range);
    size_t subnormal = 0;
    for (size_t i = 0; i < n; ++i) {
      const float v = synthetic::uniform_at(42, i, -range, range);
      ASSERT_EQ(codes[i], f32_to_e4m3(v)) << "value " << v;
      subnormal += (codes[i] & 0x78) == 0;
    }
    if (range < 1) {
      EXPECT_GT(subnormal, n / 4);
    }
  }
}

TEST(SyntheticFp8, ShapesAreThePlainShapesWithAnFp8Config) {
  for (const std::string base : {"qwen3-8b", "qwen3.6-27b", "qwen3.5-27b", "tiny"}) {
    const SyntheticShape plain = synthetic_shape(base), q = synthetic_shape(base + "-fp8");
    EXPECT_EQ(q.name, base + "-fp8");
    EXPECT_FALSE(plain.target.fp8_block128);
    EXPECT_TRUE(q.target.fp8_block128) << base;
    EXPECT_EQ(q.target.quantization, "fp8");
    EXPECT_EQ(q.target.family, plain.target.family);
    EXPECT_EQ(q.target.hidden_size, plain.target.hidden_size);
    EXPECT_EQ(q.target.num_layers, plain.target.num_layers);
    EXPECT_EQ(q.target.intermediate_size, plain.target.intermediate_size);
    EXPECT_EQ(q.target.vocab_size, plain.target.vocab_size);
    EXPECT_EQ(q.target.layer_types, plain.target.layer_types);
    EXPECT_TRUE(q.drafter.quantization.empty()) << "z-lab's drafters are bf16";
    EXPECT_EQ(q.drafter.hidden_size, plain.drafter.hidden_size);
  }
  EXPECT_THROW(synthetic_shape("-fp8"), Error);
  EXPECT_THROW(synthetic_shape("qwen3-4b-fp8"), Error);
}

// WeightStore::linear on synthetic weights with keep_fp8: block-scaled e4m3 (in_proj_a / in_proj_b bf16, as
// in Qwen's releases; the scales bf16 values), dequantising to the magnitude of the bf16 synthetic matrices,
// ±sqrt(3 / fan_in).
TEST(SyntheticFp8, LinearWeightsAreBlockScaledFp8OfTheBf16Magnitude) {
  auto tensors = std::make_shared<SyntheticTensors>(cpu_memory(), 3);
  WeightStore plain(tensors, DType::BF16), kept(tensors, DType::BF16);
  kept.set_keep_fp8(true);
  const Shape shape{300, 520};
  EXPECT_EQ(plain.linear("model.layers.0.mlp.up_proj.weight", shape).dtype, DType::BF16);
  const TensorView w = kept.linear("model.layers.0.mlp.up_proj.weight", shape);
  ASSERT_EQ(w.dtype, DType::F8_E4M3);
  ASSERT_TRUE(w.block_scaled());
  EXPECT_EQ(w.scale_shape(), (Shape{3, 5}));
  EXPECT_EQ(w.scale_bytes(), 15u * 4);
  EXPECT_EQ(kept.linear("model.layers.0.linear_attn.in_proj_a.weight", {4, 520}).dtype, DType::BF16);
  EXPECT_EQ(kept.linear("model.layers.0.linear_attn.in_proj_b.weight", {4, 520}).dtype, DType::BF16);
  EXPECT_EQ(kept.text_matrix("embed_tokens.weight", {64, 520}).dtype, DType::BF16);

  const TensorView scales =
      TensorView::contiguous(const_cast<float*>(w.scales), DType::F32, fp8_scale_shape(shape), Device::CPU);
  for (int64_t i = 0; i < scales.numel(); ++i)  // bf16 values, as Qwen's checkpoints store them
    EXPECT_EQ(synthetic::f32_bits(w.scales[i]) & 0xffffu, 0u) << "scale " << i;
  const Tensor d = dequantize_fp8_blocks(w, scales, DType::F32);
  const float a = std::sqrt(3.0f / 520.0f);
  double sum_sq = 0, max_abs = 0;
  for (int64_t i = 0; i < d.view().numel(); ++i) {
    const double v = d.as<float>()[i];
    sum_sq += v * v;
    max_abs = std::max(max_abs, std::fabs(v));
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(d.view().numel()));
  EXPECT_LE(max_abs, 1.1 * a * 1.001);
  EXPECT_GT(max_abs, 0.8 * a);
  EXPECT_NEAR(rms, a / std::sqrt(3.0), 0.1 * a / std::sqrt(3.0));  // a uniform's rms
}

// The bytes an fp8 Linear weight saves against bf16: one byte an element less, its f32 block scales more.
int64_t fp8_saving(int64_t rows, int64_t cols) { return rows * cols - 4 * ((rows + 127) / 128) * ((cols + 127) / 128); }

// What tiny-fp8's step saves over tiny's: every Linear weight of the decoder stack but in_proj_a / in_proj_b.
int64_t expected_tiny_saving(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  int64_t total = 0;
  for (const LayerType t : c.layer_types) {
    total += 2 * fp8_saving(I, H) + fp8_saving(H, I);
    if (t == LayerType::LinearAttention) {
      total += fp8_saving(2 * Hk * dk + Hv * dv, H) + fp8_saving(Hv * dv, H) + fp8_saving(H, Hv * dv);
    } else {
      total += fp8_saving(c.num_heads * hd * (c.attn_output_gate ? 2 : 1), H) + 2 * fp8_saving(c.num_kv_heads * hd, H) +
               fp8_saving(H, c.num_heads * hd);
    }
  }
  return total;
}

TEST(SyntheticFp8, TinyFp8KeepsItsWeightsFp8AndDecodesOnTheCpu) {
  const SyntheticShape plain_shape = synthetic_shape("tiny"), shape = synthetic_shape("tiny-fp8");
  auto plain = TargetModel::synthetic(plain_shape.target, {.backend = "cpu"});
  auto m = TargetModel::synthetic(shape.target, {.backend = "cpu"});
  EXPECT_EQ(m->weight_dtype(), DType::BF16);
  const int64_t saving = expected_tiny_saving(shape.target);
  ASSERT_GT(saving, 0);
  EXPECT_EQ(static_cast<int64_t>(plain->step_weight_bytes()) - static_cast<int64_t>(m->step_weight_bytes()), saving);
  EXPECT_EQ(m->dequantised_step_weight_bytes(), plain->step_weight_bytes());
  EXPECT_EQ(plain->dequantised_step_weight_bytes(), plain->step_weight_bytes());

  // A prefill and decode steps run, with finite, varied logits.
  auto s = m->new_sequence();
  ForwardResult r = run_one(*m, *s, {1, 5, 9, 2, 7, 3}, SpanMode::Prefill);
  const int64_t V = m->vocab_size();
  int32_t tok = argmax(r.logits.as<float>() + 5 * V, V);
  for (int step = 0; step < 3; ++step) {
    r = run_one(*m, *s, {tok}, SpanMode::Extend);
    m->commit(*s, 1);
    const float* l = r.logits.as<float>();
    float lo = l[0], hi = l[0];
    for (int64_t i = 0; i < V; ++i) {
      ASSERT_TRUE(std::isfinite(l[i])) << "step " << step << " logit " << i;
      lo = std::min(lo, l[i]);
      hi = std::max(hi, l[i]);
    }
    EXPECT_GT(hi - lo, 1e-3f);
    tok = argmax(l, V);
  }

  // --dtype f32 dequantises, as on a checkpoint: the plain f32 model's bytes.
  auto f32 = TargetModel::synthetic(shape.target, {.dtype = "f32", .backend = "cpu"});
  auto plain_f32 = TargetModel::synthetic(plain_shape.target, {.dtype = "f32", .backend = "cpu"});
  EXPECT_EQ(f32->step_weight_bytes(), plain_f32->step_weight_bytes());
}

// `bench steps --synthetic tiny-fp8`: the step's weights are the fp8 bytes streamed (tiny's less the saving
// above) and the bf16 step's are reported beside them, in the JSON and the text table.
TEST(SyntheticFp8, BenchStepsCountsFp8BytesBesideBf16) {
  const std::string flags =
      " --backend cpu --threads 2 --iterations 1 --contexts 24 --prefill 20 --decode-batches 1,2 "
      "--verify-batches 1 --verify-k 2";
  const CliRun plain_run = run_specserve("bench steps --synthetic tiny --json" + flags);
  const CliRun fp8_run = run_specserve("bench steps --synthetic tiny-fp8 --json" + flags);
  ASSERT_EQ(plain_run.status, 0) << plain_run.out;
  ASSERT_EQ(fp8_run.status, 0) << fp8_run.out;
  const auto p = nlohmann::json::parse(plain_run.out), q = nlohmann::json::parse(fp8_run.out);
  EXPECT_FALSE(p.contains("bf16_step_weight_bytes"));
  const auto saving = static_cast<double>(expected_tiny_saving(synthetic_shape("tiny-fp8").target));
  EXPECT_EQ(p["step_weight_bytes"].get<double>() - q["step_weight_bytes"].get<double>(), saving);
  EXPECT_EQ(q["bf16_step_weight_bytes"].get<double>(), p["step_weight_bytes"].get<double>());
  ASSERT_EQ(q["decode"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto &pd = p["decode"][i], &qd = q["decode"][i];
    EXPECT_EQ(pd["bytes"].get<double>() - qd["bytes"].get<double>(), saving);
    EXPECT_EQ(qd["bf16_bytes"].get<double>(), pd["bytes"].get<double>());
    EXPECT_GT(qd["bf16_roofline_ms"].get<double>(), qd["roofline_ms"].get<double>());
    EXPECT_FALSE(pd.contains("bf16_bytes"));
  }
  const CliRun text = run_specserve("bench steps --synthetic tiny-fp8" + flags);
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("fp8 Linear weights kept"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("bf16 roof"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace specserve::testing
