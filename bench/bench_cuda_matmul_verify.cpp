// The row-invariant matmul at verify sizes (33-256 rows and a little past), old kernels against the TMA-fed
// slice-serial kernel (backend/cuda/matmul_wgmma_tma_sm90a.cu), on the 8B's and 27B's projections one
// weight at a time and as the launches of a step (q+k+v, gate+up: one call of several weights). Paths:
//   0  the plan (Ops::matmul / matmul_multi: what the model runs today)
//   1  the wgmma kernels the plan chose before the TMA kernel (cluster or slice-serial per weight, one copy
//      of x: matmul_bf16_wgmma_multi); at <= 64 rows the plan may take the mid kernel instead (path 0)
//   2  the TMA kernel forced, its shape and split by its rule (any M)
//   3  cuBLASLt (MatmulOrder::Free: its own summation order; the vendor GEMM's rate for contrast)
// Counters: TFLOP/s, GB/s of the weights, of_copy (that over the device-to-device copy rate: 1 is the
// weight stream's roofline). Weight copies rotate over 512 MB so every call reads its weights from DRAM,
// as a model step does.
//
//   build/bin/bench_cuda_matmul_verify --benchmark_filter='BM_MatmulVerify/shape:[0-3]/M:(64|128|256)/'
//   build/bin/bench_cuda_matmul_verify --benchmark_filter='BM_MatmulVerifyShapes'
// BM_MatmulVerifyShapes forces the TMA kernel's tile shape (0 128 x 128, 1 128 x 64, 2 64 x 128) and its
// units (split 0: whole tiles, 1: one slice each, the running total handed over between CTAs).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_wgmma_tma.cuh"
#include "backend/cuda/matmul_wgmma_tma.h"
#include "core/dtype.h"
#include "cuda_bench_util.h"

namespace {

using namespace specserve;
using bench::BM_CopyRoofline;
using bench::check;
using bench::copy_bandwidth;
using bench::time_calls;
using cuda::DeviceBuffer;
namespace k = cuda::kernels;

// A call: up to three weights sharing x (their widths N[i], one K).
struct CallShape {
  int n;
  int64_t N[3], K;
  const char* name;
};
constexpr CallShape kCalls[] = {
    {3, {4096, 1024, 1024}, 4096, "8B q+k+v"}, {1, {4096}, 4096, "8B o_proj"},
    {2, {12288, 12288}, 4096, "8B gate+up"},   {1, {4096}, 12288, "8B down_proj"},
    {1, {151936}, 4096, "8B lm_head"},         {1, {5120}, 6144, "27B o_proj"},
    {1, {17408}, 5120, "27B up_proj"},         {1, {5120}, 17408, "27B down_proj"},
    {1, {1024}, 4096, "8B k_proj alone"},
};

// A device buffer of `elems` bf16 values: copies of one random 2 MB block per seed (drawn once).
DeviceBuffer random_bf16(size_t elems, uint32_t seed) {
  static std::map<uint32_t, std::vector<uint16_t>> blocks;
  std::vector<uint16_t>& block = blocks[seed];
  if (block.empty()) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    block.resize(size_t{1} << 20);
    for (auto& e : block) e = f32_to_bf16(nd(rng));
  }
  DeviceBuffer b(elems * 2);
  for (size_t off = 0; off < elems * 2; off += block.size() * 2)
    b.upload(block.data(), std::min(block.size() * 2, elems * 2 - off), off);
  return b;
}

void run(benchmark::State& st, const CallShape& s, int64_t M, int path, int shape, int split) {
  if (cuda::device_count() == 0 || !k::wgmma_available()) {
    st.SkipWithError("no compute capability 9.0 device");
    return;
  }
  const int64_t K = s.K;
  size_t w_bytes = 0;
  for (int i = 0; i < s.n; ++i) w_bytes += size_t(s.N[i] * K) * 2;
  const int copies = int(std::max<size_t>(1, ((size_t{512} << 20) + w_bytes - 1) / w_bytes));
  std::vector<std::vector<DeviceBuffer>> ws(static_cast<size_t>(copies));
  for (int c = 0; c < copies; ++c)
    for (int i = 0; i < s.n; ++i) ws[size_t(c)].push_back(random_bf16(size_t(s.N[i] * K), uint32_t(7 + i)));
  std::vector<float> xh(size_t(M * K));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : xh) v = nd(rng);
  const DeviceBuffer x = DeviceBuffer::from(xh);
  std::vector<DeviceBuffer> ys;
  for (int i = 0; i < s.n; ++i) ys.emplace_back(size_t(M * s.N[i]) * 4);
  auto call = [&](int it) {
    const std::vector<DeviceBuffer>& w = ws[size_t(it % copies)];
    std::vector<k::MatmulArgs> parts;
    std::vector<TensorView> wv, yv;
    for (int i = 0; i < s.n; ++i) {
      parts.push_back(k::MatmulArgs{.x = x.as<const float>(),
                                    .ldx = K,
                                    .w = w[size_t(i)].data(),
                                    .w_bf16 = true,
                                    .ldw = K,
                                    .y = ys[size_t(i)].as<float>(),
                                    .ldy = s.N[i],
                                    .M = M,
                                    .N = s.N[i],
                                    .K = K});
      wv.push_back(TensorView::contiguous(w[size_t(i)].data(), DType::BF16, {s.N[i], K}, Device::CUDA));
      yv.push_back(TensorView::contiguous(ys[size_t(i)].data(), DType::F32, {M, s.N[i]}, Device::CUDA));
    }
    const TensorView X = TensorView::contiguous(x.data(), DType::F32, {M, K}, Device::CUDA);
    if (path == 1) {
      if (!k::matmul_bf16_wgmma_multi(parts.data(), s.n, cuda::cuda_stream()))
        throw std::runtime_error("wgmma declined");
    } else if (path == 2) {
      if (!k::matmul_bf16_wgmma_tma(parts.data(), s.n, cuda::cuda_stream(), shape, split))
        throw std::runtime_error("wgmma-tma declined");
    } else if (path == 3) {
      const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
      cuda_ops().matmul_multi(X, wv, yv);
    } else if (s.n == 1) {
      cuda_ops().matmul(X, wv[0], yv[0]);
    } else {
      cuda_ops().matmul_multi(X, wv, yv);
    }
  };
  const double roofline = copy_bandwidth();
  time_calls(copies, call);  // warm up (and the kernels' one-time setup)
  const int calls = std::max(copies, 8);
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(calls, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  const double t = seconds / double(st.iterations());
  static const char* const kPaths[] = {"plan", "wgmma (old)", "wgmma-tma", "cublaslt"};
  int64_t cols = 0;
  for (int i = 0; i < s.n; ++i) cols += s.N[i];
  std::string label = std::string(s.name) + " " + kPaths[path];
  if (path == 2) {
    const cuda::wgt::WgtPlan chosen = cuda::wgt::choose_wgt_plan(M, K, s.N, s.n, k::matmul_device().sms, shape, split);
    static const char* const kShapeNames[] = {"128x128", "128x64", "64x128"};
    label += std::string(" ") + kShapeNames[static_cast<int>(chosen.shape)] +
             (chosen.split == cuda::wgt::WgtSplit::Slices ? " slices" : " tiles");
    st.counters["predicted_us"] =
        double(cuda::wgt::wgt_plan_cost(M, K, s.N, s.n, k::matmul_device().sms, chosen.shape, chosen.split)) / 1e3;
  }
  st.SetLabel(label);
  st.counters["GB/s"] = double(w_bytes) / t / 1e9;
  st.counters["of_copy"] = double(w_bytes) / t / roofline;
  st.counters["TFLOP/s"] = 2.0 * double(M) * double(cols) * double(K) / t / 1e12;
}

BENCHMARK(BM_CopyRoofline)->UseManualTime()->Iterations(1);

void BM_MatmulVerify(benchmark::State& st) { run(st, kCalls[st.range(0)], st.range(1), int(st.range(2)), -1, -1); }
BENCHMARK(BM_MatmulVerify)
    ->ArgNames({"shape", "M", "path"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kCalls)); ++i)
        for (int64_t m : {33, 64, 128, 256, 512})
          for (int64_t path : {0, 1, 2, 3}) b->Args({i, m, path});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The TMA kernel's tile shapes (0 128 x 128, 1 128 x 64, 2 64 x 128) and splits (0 tiles, 1 slices)
// forced: the rule's cost model (predicted_us) checked.
void BM_MatmulVerifyShapes(benchmark::State& st) {
  run(st, kCalls[st.range(0)], st.range(1), 2, int(st.range(2)), int(st.range(3)));
}
BENCHMARK(BM_MatmulVerifyShapes)
    ->ArgNames({"shape", "M", "tile", "split"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kCalls)); ++i)
        for (int64_t m : {64, 128, 256})
          for (int64_t tile = 0; tile < cuda::wgt::kWgtShapes; ++tile)
            for (int64_t split = 0; split < cuda::wgt::kWgtSplits; ++split) b->Args({i, m, tile, split});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
