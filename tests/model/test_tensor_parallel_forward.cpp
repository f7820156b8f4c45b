// The sharded target (docs/DESIGN.md §6.3), simulated on the CPU: N = 1 through the sharded path gives the
// unsharded bits; N = 2, 4 give the unsharded logits within the reduction's rounding, on the demo hybrid
// target and a tiny synthetic dense target; under N = 2 a row's bits are the same in a 1-row decode and in a
// 16-row verify (the all-reduce is row-invariant), with a partial commit replayed exactly.
#include <functional>

#include "fp8_checkpoint_writer.h"
#include "model/synthetic_shapes.h"
#include "model/layers.h"
#include "model/tensor_parallel_shards.h"
#include "tensor_parallel_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

std::unique_ptr<TargetModel> load_demo(const std::string& dtype, int tp) {
  return TargetModel::load(demo_target(), {.dtype = dtype, .tensor_parallel = tp});
}
std::unique_ptr<TargetModel> tiny(const std::string& dtype, int tp) {
  return TargetModel::synthetic(tiny_dense(), {.dtype = dtype, .tensor_parallel = tp}, 7);
}

TEST(TensorParallelForward, OneRankIsTheUnshardedModelBitForBit) {
  for (const std::string dtype : {"bf16", "f32"}) {
    expect_same_trace(run_trace(*load_demo(dtype, 0)), run_trace(*load_demo(dtype, 1)), "demo " + dtype);
    expect_same_trace(run_trace(*tiny(dtype, 0)), run_trace(*tiny(dtype, 1)), "dense " + dtype);
  }
}

TEST(TensorParallelForward, TwoAndFourRanksGiveTheUnshardedLogitsWithinRounding) {
  // f32 weights and KV cache: only the reduction's rounding differs (measured ≤ 7e-7 relative). bf16: the KV
  // cache rounds k and v to bf16, where a last-bit difference can move a rounding (measured ≤ 1.1e-4 with the
  // AVX-512 f32 kernels); on a CPU with AVX512-BF16 the matmul kernel also rounds each input row to bf16, so a
  // last-bit difference of a reduced sum becomes one bf16 ulp (2^-8) of the next layer's input: measured
  // 2.2e-3 (dense) and 4.6e-3 (demo) on an AMD EPYC with AVX512-BF16. A wrong shard or a rank left out of a
  // reduction is off by O(1).
  for (const auto& [dtype, tolerance] : {std::pair<std::string, double>{"f32", 5e-6}, {"bf16", 2e-2}}) {
    const Trace demo = run_trace(*load_demo(dtype, 0)), dense = run_trace(*tiny(dtype, 0));
    for (int n : {2, 4}) {
      expect_close(run_trace(*load_demo(dtype, n)), demo, tolerance, "demo " + dtype + " N=" + std::to_string(n));
      expect_close(run_trace(*tiny(dtype, n)), dense, tolerance, "dense " + dtype + " N=" + std::to_string(n));
    }
  }
}

// The GPU suite's hybrid (random weights of the demo's dimensions, tiny_hybrid) splits on the CPU as the demo
// does: N = 1 is its bits, N = 2 and 4 are within the f32 reduction's rounding.
TEST(TensorParallelForward, TheGpuSuitesSyntheticHybridSplits) {
  auto hybrid = [](int tp) {
    return TargetModel::synthetic(tiny_hybrid(), {.dtype = "f32", .tensor_parallel = tp}, 11);
  };
  const Trace plain = run_trace(*hybrid(0));
  expect_same_trace(plain, run_trace(*hybrid(1)), "synthetic hybrid N=1");
  for (int n : {2, 4}) expect_close(run_trace(*hybrid(n)), plain, 5e-6, "synthetic hybrid N=" + std::to_string(n));
}

// Under N = 2: a 16-row verify's rows equal 16 successive decodes bit for bit (logits and captured features),
// beside another sequence's rows, and the states continue identically.
TEST(TensorParallelForward, VerifyRowsEqualDecodeRowsUnderTwoRanks) {
  expect_verify_rows_equal_decode_rows(*load_demo("bf16", 2));
  expect_verify_rows_equal_decode_rows(*tiny("bf16", 2));
}

// A partial commit replays the kept rows of every rank's DeltaNet state as decoding them would.
TEST(TensorParallelForward, PartialCommitEqualsDecodingTheKeptRows) {
  expect_partial_commit_equals_decoding(*load_demo("bf16", 2));
}

void expect_load_error(const std::function<void()>& load, const std::string& words) {
  try {
    load();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(TensorParallelForward, RefusesWhatItCannotSplit) {
  expect_load_error([] { load_demo("bf16", 3); }, "num_key_value_heads");  // 2 KV heads
  expect_load_error([] { load_demo("bf16", 8); }, "num_attention_heads");  // 4 query heads
  // Kept fp8 weights split only on 128 x 128 scale blocks: the tiny shape's DeltaNet in_proj_qkv would give each
  // rank 32-row ranges of its q and k channels.
  expect_load_error([] { TargetModel::synthetic(synthetic_shape("tiny-fp8").target, {.tensor_parallel = 2}); },
                    "cut a 128 x 128 scale block");
}

// Kept fp8 weights (--fp8-weights keep) under N = 2 and 4: the ranks' slices carry their scale blocks (row
// slices start on a block or lie inside one; column slices and gathers are copied with their scale columns and
// rows), so a transformers-layout fp8 checkpoint gives, sharded, the bits of its dequantised bf16 weights sharded
// alike — a scale block given to the wrong rows or columns is off by the ratio of two scales.
TEST(TensorParallelForward, KeptFp8WeightsGiveTheDequantisedBitsUnderTwoAndFourRanks) {
  ScratchDir fp8("tp"), dequantised("tp-deq");
  write_fp8_pair(fixture_dir("qwen3_untied"), fp8.path(), dequantised.path(), DType::BF16);
  for (int n : {2, 4}) {
    auto kept = TargetModel::load(fp8.path(), {.dtype = "bf16", .fp8_weights = "keep", .tensor_parallel = n});
    auto plain = TargetModel::load(fp8.path(), {.dtype = "bf16", .fp8_weights = "dequantise", .tensor_parallel = n});
    ASSERT_LT(kept->step_weight_bytes(), plain->step_weight_bytes()) << "the weights were not kept fp8";
    expect_same_trace(run_trace(*kept), run_trace(*plain), "N=" + std::to_string(n), false);
  }
}

// A hybrid target with 128-wide heads (as Qwen3.6-27B's), its Linear weights kept fp8: sharded over 2 ranks it
// gives the unsharded logits within the bf16 tolerance, and a verify's rows equal decoding them.
TEST(TensorParallelForward, KeptFp8HybridUnderTwoRanks) {
  auto sharded = TargetModel::synthetic(aligned_hybrid_fp8(), {.dtype = "bf16", .tensor_parallel = 2}, 5);
  auto whole = TargetModel::synthetic(aligned_hybrid_fp8(), {.dtype = "bf16"}, 5);
  ASSERT_LT(sharded->step_weight_bytes(), sharded->dequantised_step_weight_bytes()) << "the weights were not kept fp8";
  // Measured 6.2e-3 on an AVX512-BF16 CPU (the bf16 tolerance above says why); scale rows of the DeltaNet
  // in_proj_qkv gathered from the wrong blocks gave 3.4e-2, scale columns of o_proj / out_proj / down from the
  // wrong blocks 0.23.
  expect_close(run_trace(*sharded), run_trace(*whole), 2e-2, "aligned hybrid fp8 N=2");
  expect_verify_rows_equal_decode_rows(*sharded);
}

}  // namespace
}  // namespace specserve

namespace specserve {
namespace {

// The CPU simulation places rank r in host memory of its own (cpu_rank_memory(r)), as ranks go on GPUs: each
// rank's KV plane and DeltaNet states are in its memory, and a step through them gives the one-memory bits
// (N = 1 is still the unsharded model's, the reductions the CPU collective's).
TEST(TensorParallelForward, EachRanksStateIsInItsOwnMemory) {
  auto model = TargetModel::synthetic(testing::tiny_hybrid(), {.dtype = "f32", .tensor_parallel = 2}, 11);
  const auto pool = model->kv_pool();
  ASSERT_NE(pool, nullptr);
  ASSERT_EQ(pool->planes(), 2);
  EXPECT_EQ(&pool->memory(0), &cpu_memory());
  EXPECT_EQ(&pool->memory(1), &cpu_rank_memory(1));
  EXPECT_NE(&cpu_rank_memory(1), &cpu_memory());
  auto s = model->new_sequence();
  const auto& layers = ModelInternals::deltanets(*s);
  ASSERT_EQ(layers.size(), 6u);  // 3 DeltaNet layers a rank
  for (size_t i = 0; i < layers.size(); ++i) EXPECT_EQ(layers[i].mem, &cpu_rank_memory(static_cast<int>(i / 3))) << i;
}

// relocate_tensors copies each distinct tensor (and a block-scaled one's scales) once into the target memory and
// repoints every view at its copy, the bytes unchanged; it refuses a strided view.
TEST(TensorParallelForward, RelocatedTensorsKeepTheirBytes) {
  Tensor a = Tensor::empty(DType::F32, {4, 8}), b = Tensor::empty(DType::BF16, {2, 16});
  for (int64_t i = 0; i < 32; ++i) a.as<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f;
  for (int64_t i = 0; i < 32; ++i) b.as<uint16_t>()[i] = static_cast<uint16_t>(0x3f80 + i);
  TensorView va = a.view(), vb = b.view(), tied = a.view(), empty;
  std::vector<TensorView*> views{&va, &vb, &tied, &empty};
  const Memory& to = cpu_rank_memory(5);
  Buffer moved = relocate_tensors(views, cpu_memory(), to);
  EXPECT_NE(va.data, a.view().data);
  EXPECT_EQ(va.data, tied.data);  // one copy of a tensor two views share
  EXPECT_EQ(empty.data, nullptr);
  EXPECT_EQ(std::memcmp(va.data, a.as<float>(), 32 * 4), 0);
  EXPECT_EQ(std::memcmp(vb.data, b.as<uint16_t>(), 32 * 2), 0);
  EXPECT_GE(static_cast<char*>(vb.data) - static_cast<char*>(moved.data()), 0);
  EXPECT_LT(static_cast<char*>(vb.data) - static_cast<char*>(moved.data()), static_cast<ptrdiff_t>(moved.bytes()));
  TensorView strided = a.view();
  strided.shape = Shape{4, 4};  // every row's first 4 of 8 floats
  std::vector<TensorView*> bad{&strided};
  EXPECT_THROW(relocate_tensors(bad, cpu_memory(), to), Error);
}

}  // namespace
}  // namespace specserve
