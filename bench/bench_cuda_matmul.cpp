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
// Calls rotate through enough copies of the weights (>= 512 MB in all) that every call reads them from
// DRAM, not from the 50 MB L2. Operands are random (bf16 weights N(0, 0.05), x N(0, 1)). Without a
// device every benchmark reports an error and exits.
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
#include "backend/cuda/matmul_tensor_core.cuh"
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
        for (int64_t m : {512, 2048, 4096})
          for (int64_t path : {1, 2, 0}) b->Args({i, m, path});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
