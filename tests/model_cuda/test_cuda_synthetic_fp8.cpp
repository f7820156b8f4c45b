// The synthetic fp8 shapes on CUDA (`bench steps --synthetic qwen3-8b-fp8 | qwen3.6-27b-fp8`,
// model/synthetic_shapes.h): the device makes the same e4m3 codes as the host (backend/synthetic_fill.h), so
// tiny-fp8 is the same model on both backends, and its kept weights run the fp8 kernels of a loaded fp8
// checkpoint (docs/MODELS.md §6.1): extend rows equal decode rows bit for bit, past the gemv's 16 rows.
#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "backend/memory.h"
#include "model/synthetic_shapes.h"
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

TEST(CudaSyntheticFp8, DeviceCodesEqualTheHostCodes) {
  SKIP_WITHOUT_GPU();
  const Memory& gpu = *backend_named("cuda").memory;
  const size_t n = 1 << 20;
  for (const float range : {448.0f, 0.03f}) {
    Buffer device(gpu, n);
    gpu.fill_uniform(device.data(), DType::F8_E4M3, n, 77, -range, range);
    std::vector<uint8_t> got(n), want(n);
    gpu.download(got.data(), device.data(), n);
    cpu_memory().fill_uniform(want.data(), DType::F8_E4M3, n, 77, -range, range);
    ASSERT_EQ(got, want) << "range " << range;
  }
}

TEST(CudaSyntheticFp8, TinyFp8IsTheCpuModelAndKeepsExtendRowsEqualToDecodeRows) {
  SKIP_WITHOUT_GPU();
  const SyntheticShape shape = synthetic_shape("tiny-fp8");
  auto gpu = TargetModel::synthetic(shape.target, {.backend = "cuda"});
  auto cpu = TargetModel::synthetic(shape.target, {.backend = "cpu"});
  auto plain = TargetModel::synthetic(synthetic_shape("tiny").target, {.backend = "cuda"});
  EXPECT_EQ(gpu->step_weight_bytes(), cpu->step_weight_bytes());
  EXPECT_LT(gpu->step_weight_bytes(), plain->step_weight_bytes());
  EXPECT_EQ(gpu->dequantised_step_weight_bytes(), plain->step_weight_bytes());

  // The same weights: the prefill's last logits row agrees within bf16 noise (different weights would not). On
  // sm_90a the prefill matmuls run W8A8 (activations rounded to e4m3 per 128 columns: a few percent per matmul,
  // backend/cuda/matmul_prefill_fp8_sm90a.cu), so the bound there is wider — still far below different weights'.
  const std::vector<int32_t> prompt{1, 5, 9, 2, 7, 3, 11, 4};
  auto sg = gpu->new_sequence(), sc = cpu->new_sequence();
  const ForwardResult rg = run_one(*gpu, *sg, prompt, SpanMode::Prefill, LogitsWanted::Last);
  const ForwardResult rc = run_one(*cpu, *sc, prompt, SpanMode::Prefill, LogitsWanted::Last);
  const int64_t V = gpu->vocab_size();
  const bool w8a8 = cuda::kernels::matmul_device().wgmma && cuda::kernels::matmul_device().fp8_w8a8;
  EXPECT_LT(rel_err(rg.logits.as<float>(), rc.logits.as<float>(), V), w8a8 ? 0.15 : 0.05);

  const std::vector<int32_t> next{5, 9, 2, 6, 5, 3, 8, 1, 7, 4, 2, 9, 6, 3, 5, 8, 1};  // 17 rows: past 16
  auto a = gpu->new_sequence(), b = gpu->new_sequence();
  run_one(*gpu, *a, prompt, SpanMode::Prefill, LogitsWanted::None);
  run_one(*gpu, *b, prompt, SpanMode::Prefill, LogitsWanted::None);
  const ForwardResult extend = run_one(*gpu, *a, next, SpanMode::Extend);
  for (size_t i = 0; i < next.size(); ++i) {
    const ForwardResult one = run_one(*gpu, *b, {next[i]}, SpanMode::Extend);
    gpu->commit(*b, 1);
    ASSERT_EQ(row(one.logits, 0), row(extend.logits, static_cast<int64_t>(i))) << "row " << i;
  }
}

}  // namespace
}  // namespace specserve
