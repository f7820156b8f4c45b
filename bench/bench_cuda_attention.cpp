// CUDA attention (backend/cuda/attention.cu: kv_store excluded, the split-KV partial and combine
// kernels included, with the op's staging) at the engine's row shapes, for the attention layers of an
// 8B model (32 query heads, 8 KV heads, head_dim 128) and of qwen3.6-27b (24, 4, 256). Per (shape,
// sequences B, rows per sequence K, context C) it reports the time per call and
//   KV_GB/s   the KV bytes the call must read (each sequence's C + K positions, K and V, in the cache's
//             element type: kv 0 an f32 cache, kv 1 a bf16 one) per second,
//   of_copy   that over the device-to-device copy bandwidth (BM_CopyRoofline).
// Rows are K consecutive positions C .. C + K - 1 of each sequence, as a verify (K > 1) or a decode
// (K = 1); K = 512 with C = 1536 is a prefill chunk. Blocks of each sequence sit at shuffled places of
// one pool, as in serving.
//
// form (bf16 caches): the split kernel's choice (0), its split form (1: a CTA a chunk, then the combine kernel)
// or its walking form (2: a CTA walks an item's chunks and merges them; attention_split_tc.cu).
//
// BM_AttentionPrefill: one sequence's prefill chunk of K rows at context C (its rows at positions C ..
// C + K - 1) through Ops::attention_prefill (attention_prefill.cu's tensor-core kernels; kernel 1: its
// default, the wgmma kernel with two query heads per CTA where the group is even; kernel 2: one;
// kernel 3: the staged kernel, PrefillKernel::Staged, which an f32 cache takes in 1, 2 and 4 too; kernel 4:
// the pipelined mma.sync kernel) or Ops::attention (kernel 0: the split-KV kernels); TFLOP/s counts the
// causal products, 4 · hd · heads per (row, visible key).
//
//   build/bin/bench_cuda_attention [--benchmark_filter='shape:0/']   (kv:0 f32 cache, kv:1 bf16)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/attention_split_tc.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/device_buffer.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "cuda_bench_util.h"

namespace {

using namespace specserve;
using bench::BM_CopyRoofline;
using bench::copy_bandwidth;
using bench::time_calls;
using cuda::DeviceBuffer;

struct HeadShape {
  int heads, kv_heads, head_dim;
  const char* name;
};
constexpr HeadShape kShapes[] = {{32, 8, 128, "8B"}, {24, 4, 256, "27B"}};

// B sequences x K rows at context C.
struct RowShape {
  int64_t B, K, C;
};
constexpr RowShape kRows[] = {{1, 1, 512},  {1, 1, 4096},  {1, 1, 32768},  {16, 1, 512},  {64, 1, 512}, {1, 16, 512},
                              {4, 16, 512}, {16, 16, 512}, {1, 512, 1536}, {1, 8, 512},   {2, 16, 512}, {16, 8, 512},
                              {64, 4, 512}, {32, 8, 512},  {16, 8, 2048},  {16, 1, 2048}, {64, 1, 1024}};

DeviceBuffer random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return DeviceBuffer::from(v);
}

// n random values in the cache's element type (f32, or bf16 rounded from them).
DeviceBuffer random_kv(size_t n, DType dtype, uint32_t seed) {
  if (dtype == DType::F32) return random_floats(n, seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& e : v) e = f32_to_bf16(d(rng));
  return DeviceBuffer::from(v);
}

// B sequences of `positions` random keys and values each, their blocks at shuffled places of one pool.
struct PagedSequences {
  DeviceBuffer pool;
  std::vector<std::vector<void*>> tables;
  PagedSequences(const KvGeometry& geo, int64_t B, int64_t positions) : tables(static_cast<size_t>(B)) {
    const int64_t blocks_per_seq = (positions + kKvBlockSize - 1) / kKvBlockSize, blocks = B * blocks_per_seq;
    pool = random_kv(static_cast<size_t>(blocks * geo.block_elems()), geo.dtype, 1);
    std::vector<int64_t> order(static_cast<size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(2));
    for (int64_t s = 0; s < B; ++s)
      for (int64_t b = 0; b < blocks_per_seq; ++b)
        tables[size_t(s)].push_back(pool.as<char>() + order[size_t(s * blocks_per_seq + b)] * geo.block_bytes());
  }
};

void BM_Attention(benchmark::State& st) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const HeadShape& h = kShapes[st.range(0)];
  const RowShape& rs = kRows[st.range(1)];
  const KvGeometry geo{1, h.kv_heads, h.head_dim, st.range(2) == 1 ? DType::BF16 : DType::F32};
  const int64_t positions = rs.C + rs.K;
  PagedSequences seqs(geo, rs.B, positions);
  auto& tables = seqs.tables;
  std::vector<AttentionRow> rows;
  for (int64_t s = 0; s < rs.B; ++s)
    for (int64_t j = 0; j < rs.K; ++j) rows.push_back({tables[size_t(s)].data(), static_cast<int32_t>(rs.C + j), 0});
  const auto R = static_cast<int64_t>(rows.size());
  const int64_t width = int64_t{h.heads} * h.head_dim;
  DeviceBuffer q = random_floats(static_cast<size_t>(R * width), 3), out(static_cast<size_t>(R * width) * 4);
  const TensorView Q = TensorView::contiguous(q.data(), DType::F32, {R, width}, Device::CUDA);
  const TensorView O = TensorView::contiguous(out.data(), DType::F32, {R, width}, Device::CUDA);
  const float scale = 1.0f / 11.3f;
  const auto form = static_cast<cuda::attn::SplitWalk>(st.range(3));
  cuda::attn::set_split_walk(form);
  auto call = [&](int) { cuda_ops().attention(Q, geo, 0, rows, h.heads, scale, O); };
  const double roofline = copy_bandwidth();
  time_calls(3, call);  // warm up (attribute setup, scratch, staging)
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(10, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  cuda::attn::set_split_walk(cuda::attn::SplitWalk::Auto);
  const double t = seconds / double(st.iterations());
  const double kv_bytes = double(rs.B) * double(positions) * 2.0 * h.kv_heads * h.head_dim * double(geo.elem_bytes());
  st.SetLabel(std::string(h.name) + " B=" + std::to_string(rs.B) + " K=" + std::to_string(rs.K) +
              " C=" + std::to_string(rs.C) + (geo.bf16() ? " bf16 KV" : " f32 KV") +
              (form == cuda::attn::SplitWalk::Never    ? " split"
               : form == cuda::attn::SplitWalk::Always ? " walk"
                                                       : ""));
  st.counters["KV_GB/s"] = kv_bytes / t / 1e9;
  st.counters["of_copy"] = kv_bytes / t / roofline;
}

// Prefill chunks (K rows at context C): a whole 4k prompt, and 2048-row chunks at 16k and 64k.
constexpr RowShape kPrefillRows[] = {{1, 4096, 0}, {1, 2048, 14336}, {1, 2048, 63488}};

void BM_AttentionPrefill(benchmark::State& st) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const HeadShape& h = kShapes[st.range(0)];
  const RowShape& rs = kPrefillRows[st.range(1)];
  const bool kernel = st.range(2) >= 1;
  cuda::kernels::set_prefill_heads(st.range(2) == 2 ? cuda::kernels::PrefillHeads::One
                                                    : cuda::kernels::PrefillHeads::Auto);
  cuda::kernels::set_prefill_kernel(st.range(2) == 3   ? cuda::kernels::PrefillKernel::Staged
                                    : st.range(2) == 4 ? cuda::kernels::PrefillKernel::Pipelined
                                                       : cuda::kernels::PrefillKernel::Wgmma);
  const KvGeometry geo{1, h.kv_heads, h.head_dim, st.range(3) == 1 ? DType::BF16 : DType::F32};
  PagedSequences seqs(geo, 1, rs.C + rs.K);
  std::vector<AttentionRow> rows;
  double products = 0;
  for (int64_t j = 0; j < rs.K; ++j) {
    rows.push_back({seqs.tables[0].data(), static_cast<int32_t>(rs.C + j), 0});
    products += double(rs.C + j + 1);
  }
  const auto R = static_cast<int64_t>(rows.size());
  const int64_t width = int64_t{h.heads} * h.head_dim;
  DeviceBuffer q = random_floats(static_cast<size_t>(R * width), 3), out(static_cast<size_t>(R * width) * 4);
  const TensorView Q = TensorView::contiguous(q.data(), DType::F32, {R, width}, Device::CUDA);
  const TensorView O = TensorView::contiguous(out.data(), DType::F32, {R, width}, Device::CUDA);
  const float scale = 1.0f / 11.3f;
  auto call = [&](int) {
    if (kernel)
      cuda_ops().attention_prefill(Q, geo, 0, rows, h.heads, scale, O);
    else
      cuda_ops().attention(Q, geo, 0, rows, h.heads, scale, O);
  };
  time_calls(1, call);  // warm up (attribute setup, scratch, staging)
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(3, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  const double t = seconds / double(st.iterations());
  cuda::kernels::set_prefill_heads(cuda::kernels::PrefillHeads::Auto);
  cuda::kernels::set_prefill_kernel(cuda::kernels::PrefillKernel::Wgmma);
  const char* const kWhat[] = {" attention()", " prefill kernel", " prefill 1 head/CTA", " prefill staged kernel",
                               " prefill pipelined kernel"};
  const char* what = kWhat[st.range(2)];
  st.SetLabel(std::string(h.name) + what + " K=" + std::to_string(rs.K) + " C=" + std::to_string(rs.C) +
              (geo.bf16() ? " bf16 KV" : " f32 KV"));
  st.counters["TFLOP/s"] = products * 4.0 * h.head_dim * h.heads / t / 1e12;
}

BENCHMARK(BM_CopyRoofline)->UseManualTime()->Iterations(1);
BENCHMARK(BM_AttentionPrefill)
    ->ArgNames({"shape", "rows", "kernel", "kv"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kShapes)); ++i)
        for (int64_t r = 0; r < int64_t(std::size(kPrefillRows)); ++r)
          for (int64_t k = 0; k < 5; ++k)
            for (int64_t kv = 0; kv < 2; ++kv) b->Args({i, r, k, kv});
    })
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Attention)
    ->ArgNames({"shape", "rows", "kv", "form"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kShapes)); ++i)
        for (int64_t r = 0; r < int64_t(std::size(kRows)); ++r)
          for (int64_t kv = 0; kv < 2; ++kv)
            for (int64_t form = 0; form < (kv == 1 ? 3 : 1); ++form) b->Args({i, r, kv, form});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
