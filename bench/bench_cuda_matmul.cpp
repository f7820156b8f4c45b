// CUDA matmul with bf16 weights (the tensor-core kernel, backend/cuda/matmul_tensor_core.cu) at decode,
// verify and prefill row counts, for the weight shapes of an 8B model (hidden 4096, MLP 12288, vocab
// 151,936) and a 27B-class one (hidden 5120, MLP 17408). Per (shape, M) it reports the time per call
// and (the label: the shape and the K split S of matmul_tensor_core.cuh's k_split)
//   GB/s        weight bytes per second (N * K * 2 bytes per call: one call reads the weights once),
//   of_copy     that as a fraction of the device-to-device copy bandwidth (BM_CopyRoofline: bytes read
//               + written per second by cudaMemcpyAsync), the memory roofline for M <= 16,
//   TFLOP/s     2 * M * N * K per second (the matrix roofline for prefill: about 990 dense bf16 on an
//               H100/H200 with wgmma; this kernel uses mma.sync).
//
//   build/bin/bench_cuda_matmul [--benchmark_filter='M:1/']    (BM_CopyRoofline runs first: the ratio's base)
//
// BM_MatmulPaths times the prefill rows' paths at prefill row counts on the same shapes: path 1 is
// Ops::matmul_prefill (the TMA/wgmma GEMM, matmul_prefill_sm90a.cu), path 2 cuBLASLt through
// MatmulOrder::Free (the vendor GEMM's rate, measured in the same run: the ratio's base), path 0 the
// row-invariant kernels prefill used before.
//
// BM_MatmulFp8 times block-scaled fp8 weights at decode and verify rows (1-32: the fp8 gemv kernel,
// backend/cuda/matmul_fp8_gemv.cu) on the 8B and 27B projections, one weight or the parts that share a
// launch in a step (q+k+v, gate+up); GB/s and of_copy count the bytes the kernel must stream (codes and
// block scales). Variants: 0 bf16-valued scales (Qwen's checkpoints: the bf16x2 multiply), 1 f32 scales
// (the folded path: one f32 multiply a code), 2 f32 scales on the e4m3 conversion instructions (the first
// kernel's dequantisation), 3 the same parts as bf16 weights through Ops::matmul_multi (the bf16 gemv: the
// speed-up's base; its bytes are twice as many, so compare the times); at 1 and 16 rows also 4 bf16 scales
// with the straight tiles off (every tile chunk by chunk, as the kernel before them ran), 5-8 bf16 scales
// with 3, 4, 6 or 8 stages per warp forced (the launch's own choice is variant 0).
//
//   build/bin/bench_cuda_matmul --benchmark_filter='CopyRoofline|MatmulFp8'
//   build/bin/bench_cuda_matmul --benchmark_filter='CopyRoofline|MatmulFp8/shape:[0-3]/M:(1|16)/'
//
// Calls rotate through enough copies of the weights (>= 512 MB in all) that every call reads them from
// DRAM, not from the 50 MB L2. Operands are random (bf16 weights N(0, 0.05), x N(0, 1); fp8 codes uniform
// over the finite codes, scales about 0.05 / 448). Without a device every benchmark reports an error and
// exits.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/step_graphs.h"
#include "cuda_bench_util.h"
#include "core/dtype.h"

namespace {

using namespace specserve;
using bench::BM_CopyRoofline;
using bench::check;
using bench::copy_bandwidth;
using bench::time_calls;
using cuda::DeviceBuffer;

struct WeightShape {
  int64_t N, K;
  const char* name;
};
constexpr WeightShape kShapes[] = {
    {4096, 4096, "8B q/o_proj"},    {24576, 4096, "8B gate+up"}, {4096, 12288, "8B down_proj"},
    {151936, 4096, "8B lm_head"},   {5120, 5120, "27B o_proj"},  {17408, 5120, "27B up_proj"},
    {5120, 17408, "27B down_proj"},
};
constexpr int64_t kRows[] = {1, 4, 16, 32, 64, 128, 256, 2048};

// A device buffer of `bytes` filled with copies of one random 16 MB block of T (values from `draw`).
template <class T, class Draw>
DeviceBuffer random_buffer(size_t bytes, Draw draw) {
  constexpr size_t kBlock = size_t{16} << 20;
  static const std::vector<T> host = [&] {
    std::mt19937 rng(7);
    std::vector<T> v(kBlock / sizeof(T));
    for (auto& e : v) e = draw(rng);
    return v;
  }();
  DeviceBuffer b(bytes);
  for (size_t off = 0; off < bytes; off += kBlock) b.upload(host.data(), std::min(kBlock, bytes - off), off);
  return b;
}

DeviceBuffer random_x(size_t floats) {
  return random_buffer<float>(floats * 4,
                              [](std::mt19937& r) { return std::normal_distribution<float>(0.0f, 1.0f)(r); });
}
DeviceBuffer random_w(size_t elems) {
  return random_buffer<uint16_t>(
      elems * 2, [](std::mt19937& r) { return f32_to_bf16(std::normal_distribution<float>(0.0f, 0.05f)(r)); });
}

// The weight copies of one shape (kept while consecutive benchmarks use the same shape).
const std::vector<DeviceBuffer>& weights(int shape, int copies) {
  static int cached = -1;
  static std::vector<DeviceBuffer> ws;
  if (cached != shape) {
    ws.clear();
    for (int c = 0; c < copies; ++c) ws.push_back(random_w(size_t(kShapes[shape].N * kShapes[shape].K)));
    cached = shape;
  }
  return ws;
}

BENCHMARK(BM_CopyRoofline)->UseManualTime()->Iterations(1);

void run_matmul(benchmark::State& st, int path) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const WeightShape s = kShapes[st.range(0)];
  const int64_t M = st.range(1), N = s.N, K = s.K;
  const size_t w_bytes = size_t(N * K) * 2;
  const int copies = int(std::max<size_t>(1, ((size_t{512} << 20) + w_bytes - 1) / w_bytes));
  const std::vector<DeviceBuffer>& ws = weights(int(st.range(0)), copies);
  DeviceBuffer x = random_x(size_t(M * K)), y(size_t(M * N) * 4);
  const TensorView X = TensorView::contiguous(x.data(), DType::F32, {M, K}, Device::CUDA);
  const TensorView Y = TensorView::contiguous(y.data(), DType::F32, {M, N}, Device::CUDA);
  auto call = [&](int i) {
    const TensorView W = TensorView::contiguous(ws[size_t(i % copies)].data(), DType::BF16, {N, K}, Device::CUDA);
    if (path == 1) {
      cuda_ops().matmul_prefill(X, W, Y);
    } else if (path == 2) {
      const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
      cuda_ops().matmul(X, W, Y);
    } else {
      cuda_ops().matmul(X, W, Y);
    }
  };
  const double roofline = copy_bandwidth();
  time_calls(copies, call);  // warm up (and the kernels' one-time attribute setup)
  const int calls = std::max(copies, 8);
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(calls, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  const double t = seconds / double(st.iterations());
  static const char* const kPaths[] = {"", " prefill-gemm", " cublaslt"};
  st.SetLabel(std::string(s.name) + " S=" + std::to_string(cuda::tc::k_split(N, K, cuda::tc::split_target_ctas()).S) +
              kPaths[path]);
  st.counters["GB/s"] = double(w_bytes) / t / 1e9;
  st.counters["of_copy"] = double(w_bytes) / t / roofline;
  st.counters["TFLOP/s"] = 2.0 * double(M) * double(N) * double(K) / t / 1e12;
}
void BM_MatmulBf16(benchmark::State& st) { run_matmul(st, 0); }
void BM_MatmulPaths(benchmark::State& st) { run_matmul(st, int(st.range(2))); }

BENCHMARK(BM_MatmulBf16)
    ->ArgNames({"shape", "M"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kShapes)); ++i)
        for (int64_t m : kRows) b->Args({i, m});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_MatmulPaths)
    ->ArgNames({"shape", "M", "path"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kShapes)); ++i)
        for (int64_t m : {64, 128, 256, 512, 2048, 4096})
          for (int64_t path : {1, 2, 0}) b->Args({i, m, path});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// ---- fp8 weights ---------------------------------------------------------------------------------------

struct Fp8Shape {
  int64_t K;
  int parts;
  int64_t N[3];
  const char* name;
};
constexpr Fp8Shape kFp8Shapes[] = {
    {4096, 1, {4096}, "8B q/o_proj"},        {4096, 3, {4096, 1024, 1024}, "8B q+k+v"},
    {4096, 2, {12288, 12288}, "8B gate+up"}, {12288, 1, {4096}, "8B down_proj"},
    {5120, 1, {5120}, "27B o_proj"},         {5120, 2, {17408, 17408}, "27B gate+up"},
    {17408, 1, {5120}, "27B down_proj"},
};

// Random e4m3 codes (no NaN code), and block scales about 0.05 / 448: bf16 values, or f32 ones.
DeviceBuffer random_codes(size_t n) {
  return random_buffer<uint8_t>(n, [](std::mt19937& r) {
    const auto c = static_cast<uint8_t>(r());
    return (c & 0x7f) == 0x7f ? static_cast<uint8_t>(c ^ 1) : c;
  });
}
DeviceBuffer random_scales(size_t n, bool bf16) {
  std::mt19937 rng(11);
  std::vector<float> s(n);
  for (auto& v : s) {
    v = std::uniform_real_distribution<float>(0.9f, 1.1f)(rng) * 0.05f / 448.0f;
    if (bf16) v = bf16_to_f32(f32_to_bf16(v));
  }
  return DeviceBuffer::from(s);
}

void BM_MatmulFp8(benchmark::State& st) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const Fp8Shape s = kFp8Shapes[st.range(0)];
  const int64_t M = st.range(1), K = s.K;
  const int variant = int(st.range(2));
  const bool bf16_weights = variant == 3;
  const bool bf16_scales = variant == 0 || variant >= 4;
  size_t codes = 0, scale_bytes = 0;
  for (int p = 0; p < s.parts; ++p) {
    codes += size_t(s.N[p] * K);
    scale_bytes += size_t(cuda::tc::ceil_div(s.N[p], 128) * cuda::tc::ceil_div(K, 128)) * 4;
  }
  const size_t call_bytes = codes * (bf16_weights ? 2 : 1) + (bf16_weights ? 0 : scale_bytes);
  const int copies = int(std::max<size_t>(1, ((size_t{512} << 20) + call_bytes - 1) / call_bytes));
  std::vector<std::vector<DeviceBuffer>> w(size_t(s.parts));  // [part][copy]
  std::vector<DeviceBuffer> scales, ys;
  for (int p = 0; p < s.parts; ++p) {
    for (int c = 0; c < copies; ++c)
      w[size_t(p)].push_back(bf16_weights ? random_w(size_t(s.N[p] * K)) : random_codes(size_t(s.N[p] * K)));
    scales.push_back(random_scales(size_t(cuda::tc::ceil_div(s.N[p], 128) * cuda::tc::ceil_div(K, 128)), bf16_scales));
    ys.emplace_back(size_t(M * s.N[p]) * 4);
  }
  DeviceBuffer x = random_x(size_t(M * K));
  cuda::kernels::Fp8GemvForce force;
  if (variant == 2) force.convert = 1;
  if (variant == 4) force.regular = 0;
  static const int kStagesOf[] = {3, 4, 6, 8};
  if (variant >= 5) force.stages = kStagesOf[variant - 5];
  auto call = [&](int i) {
    const int c = i % copies;
    if (bf16_weights) {
      std::vector<TensorView> ws, yv;
      for (int p = 0; p < s.parts; ++p) {
        ws.push_back(TensorView::contiguous(w[size_t(p)][size_t(c)].data(), DType::BF16, {s.N[p], K}, Device::CUDA));
        yv.push_back(TensorView::contiguous(ys[size_t(p)].data(), DType::F32, {M, s.N[p]}, Device::CUDA));
      }
      cuda_ops().matmul_multi(TensorView::contiguous(x.data(), DType::F32, {M, K}, Device::CUDA), ws, yv);
      return;
    }
    cuda::kernels::MatmulArgs a[3];
    for (int p = 0; p < s.parts; ++p) {
      a[p].x = static_cast<const float*>(x.data());
      a[p].ldx = K;
      a[p].w = w[size_t(p)][size_t(c)].data();
      a[p].ldw = K;
      a[p].w_scales = static_cast<const float*>(scales[size_t(p)].data());
      a[p].scale_ld = cuda::tc::ceil_div(K, 128);
      a[p].y = static_cast<float*>(ys[size_t(p)].data());
      a[p].ldy = s.N[p];
      a[p].M = M;
      a[p].N = s.N[p];
      a[p].K = K;
    }
    cuda::kernels::matmul_fp8_gemv_multi(a, s.parts, cuda::launch_stream(), force);
  };
  const double roofline = copy_bandwidth();
  time_calls(copies, call);  // warm up (and the kernels' one-time attribute setup)
  const int calls = std::max(copies, 8);
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(calls, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  const double t = seconds / double(st.iterations());
  static const char* const kVariants[] = {" bf16 scales",           " f32 scales",
                                          " f32 scales, cvt",       " as bf16 weights",
                                          " bf16 scales, chunks",   " bf16 scales, 3 stages",
                                          " bf16 scales, 4 stages", " bf16 scales, 6 stages",
                                          " bf16 scales, 8 stages"};
  st.SetLabel(std::string(s.name) + " S=" +
              std::to_string(cuda::tc::k_split(s.N[0], K, cuda::tc::split_target_ctas()).S) + kVariants[variant]);
  st.counters["GB/s"] = double(call_bytes) / t / 1e9;
  st.counters["of_copy"] = double(call_bytes) / t / roofline;
  st.counters["us_at_copy"] = double(call_bytes) / roofline * 1e6;
}

BENCHMARK(BM_MatmulFp8)
    ->ArgNames({"shape", "M", "variant"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kFp8Shapes)); ++i)
        for (int64_t m : {1, 4, 8, 16, 32})
          for (int64_t v = 0; v <= (m == 1 || m == 16 ? 8 : 3); ++v) b->Args({i, m, v});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
