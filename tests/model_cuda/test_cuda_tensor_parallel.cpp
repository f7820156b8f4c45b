// --tensor-parallel N on one GPU (docs/DESIGN.md §6.5): every rank on the ops' GPU, the partials summed in rank
// order by the one-GPU collective. N = 1 through the sharded path gives the unsharded GPU model's bits (a
// synthetic model's ranks sliced on the GPU, a loaded checkpoint's on the host before their upload); N = 2,
// 4 give its logits within the reduction's rounding; under N = 2 a 16-row verify's rows equal 16 decodes bit
// for bit and a partial commit equals decoding the kept rows; the GPU's N = 2 follows the CPU simulation's; kept
// fp8 weights sharded give the bits of their dequantised bf16 weights sharded alike. The models: a synthetic hybrid
// of the demo target's dimensions and a tiny dense one (random weights: no checkpoint needed), and the fixtures.
#include "../model/fp8_checkpoint_writer.h"
#include "../model/tensor_parallel_test_util.h"
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

// The hybrid: random weights of the demo target's dimensions (tiny_hybrid), so that a GPU run needs no checkpoint.
std::unique_ptr<TargetModel> hybrid(const std::string& dtype, int tp) {
  return TargetModel::synthetic(tiny_hybrid(), {.dtype = dtype, .backend = "cuda", .tensor_parallel = tp}, 11);
}
std::unique_ptr<TargetModel> tiny(const std::string& dtype, int tp) {
  return TargetModel::synthetic(tiny_dense(), {.dtype = dtype, .backend = "cuda", .tensor_parallel = tp}, 7);
}

TEST(CudaTensorParallel, OneRankIsTheUnshardedModelBitForBit) {
  SKIP_WITHOUT_GPU();
  for (const std::string dtype : {"bf16", "f32"}) {
    expect_same_trace(run_trace(*hybrid(dtype, 0)), run_trace(*hybrid(dtype, 1)), "hybrid " + dtype);
    expect_same_trace(run_trace(*tiny(dtype, 0)), run_trace(*tiny(dtype, 1)), "dense " + dtype);
  }
}

// A loaded checkpoint is sharded on the host and each rank's slices uploaded (docs/DESIGN.md §6.5): one rank so
// gives the unsharded load's bits, bf16 and f32, dense and hybrid, and with kept fp8 weights (whose codes a rank
// puts in the GPU's order after its upload, where the unsharded load arranges the whole matrix).
TEST(CudaTensorParallel, OneRankOfALoadedCheckpointIsTheUnshardedLoadBitForBit) {
  SKIP_WITHOUT_GPU();
  for (const char* fixture : {"qwen3_untied", "qwen3_5_flat"})
    for (const std::string dtype : {"bf16", "f32"}) {
      auto load = [&](int tp) {
        return TargetModel::load(cuda_fixture_dir(fixture), {.dtype = dtype, .backend = "cuda", .tensor_parallel = tp});
      };
      expect_same_trace(run_trace(*load(0)), run_trace(*load(1)), std::string(fixture) + " " + dtype);
    }
  ScratchDir fp8("cuda-tp1"), dequantised("cuda-tp1-deq");
  write_fp8_pair(cuda_fixture_dir("qwen3_untied"), fp8.path(), dequantised.path(), DType::BF16);
  auto kept = [&](int tp) {
    return TargetModel::load(fp8.path(),
                             {.dtype = "bf16", .backend = "cuda", .fp8_weights = "keep", .tensor_parallel = tp});
  };
  expect_same_trace(run_trace(*kept(0)), run_trace(*kept(1)), "kept fp8", false);
}

TEST(CudaTensorParallel, TwoAndFourRanksGiveTheUnshardedLogitsWithinRounding) {
  SKIP_WITHOUT_GPU();
  // The CPU simulation's tolerances (tests/model/test_tensor_parallel_forward.cpp): f32 weights and KV, only
  // the reduction's rounding moves; bf16, a last-bit difference of a sum can move a bf16 rounding of the
  // KV cache or of a matmul's input row. A wrong shard or a rank left out of a reduction is off by O(1).
  for (const auto& [dtype, tolerance] : {std::pair<std::string, double>{"f32", 1e-4}, {"bf16", 2e-2}}) {
    const Trace plain_hybrid = run_trace(*hybrid(dtype, 0)), plain_dense = run_trace(*tiny(dtype, 0));
    for (int n : {2, 4}) {
      expect_close(run_trace(*hybrid(dtype, n)), plain_hybrid, tolerance,
                   "hybrid " + dtype + " N=" + std::to_string(n));
      expect_close(run_trace(*tiny(dtype, n)), plain_dense, tolerance, "dense " + dtype + " N=" + std::to_string(n));
    }
  }
}

TEST(CudaTensorParallel, FollowsTheCpuSimulation) {
  SKIP_WITHOUT_GPU();
  // Both backends at N = 2 in f32 on the dense and hybrid fixtures (head dim 32: the f32 prefill attention), at
  // the tolerance of the GPU model tests (test_cuda_reference_parity.cpp). The GPU's bits need not be the CPU's.
  for (const char* fixture : {"qwen3_untied", "qwen3_5_flat"}) {
    auto load = [&](const char* backend) {
      return TargetModel::load(cuda_fixture_dir(fixture), {.dtype = "f32", .backend = backend, .tensor_parallel = 2});
    };
    expect_close(run_trace(*load("cuda")), run_trace(*load("cpu")), 1e-4, std::string(fixture) + " N=2, GPU vs CPU",
                 /*must_differ=*/false);
  }
}

TEST(CudaTensorParallel, VerifyRowsEqualDecodeRowsUnderTwoRanks) {
  SKIP_WITHOUT_GPU();
  expect_verify_rows_equal_decode_rows(*hybrid("bf16", 2));
  expect_verify_rows_equal_decode_rows(*tiny("bf16", 2));
}

TEST(CudaTensorParallel, PartialCommitEqualsDecodingTheKeptRows) {
  SKIP_WITHOUT_GPU();
  expect_partial_commit_equals_decoding(*hybrid("bf16", 2));
}

TEST(CudaTensorParallel, KeptFp8WeightsGiveTheDequantisedBitsUnderTwoRanks) {
  SKIP_WITHOUT_GPU();
  // The trace starts with a prefill, which on sm_90a takes the W8A8 GEMM with kept weights (its own bits,
  // docs/DESIGN.md §1.2): the test sends prefill through the dequantisation, as the unsharded fp8 tests do.
  const DequantisedFp8Prefill dequant;
  ScratchDir fp8("cuda-tp"), dequantised("cuda-tp-deq");
  write_fp8_pair(cuda_fixture_dir("qwen3_untied"), fp8.path(), dequantised.path(), DType::BF16);
  auto load = [&](const char* weights) {
    return TargetModel::load(fp8.path(),
                             {.dtype = "bf16", .backend = "cuda", .fp8_weights = weights, .tensor_parallel = 2});
  };
  expect_same_trace(run_trace(*load("keep")), run_trace(*load("dequantise")), "kept vs dequantised, N=2", false);
}

}  // namespace
}  // namespace specserve
