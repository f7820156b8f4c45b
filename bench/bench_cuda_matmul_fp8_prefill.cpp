// Prefill matmuls with block-scaled fp8 weights (Qwen's FP8 checkpoints) against the bf16 prefill GEMM, on the
// 8B shapes (q/o_proj 4096 x 4096, gate or up 12288 x 4096, gate+up in one call, down_proj 4096 x 12288) and the
// 27B down projection (5120 x 17408), at prefill row counts; and gate+up as the MLP runs them, in the prefill GEMMs'
// SwiGLU forms (Ops::matmul_prefill_swiglu: h and, with fp8 weights, h's quantised copy; the dequantise path has
// none and runs the two GEMMs and the swiglu kernel). Paths (the label says which):
//   0 fp8 W8A8: Ops::matmul_prefill with the fp8 weight, the W8A8 GEMM (backend/cuda/matmul_prefill_fp8_sm90a.cu),
//     its activation pass included;
//   1 fp8 dequant: the same call with the W8A8 GEMM off (the weight dequantised to bf16, then the bf16 GEMM: the
//     path before it);
//   2 bf16: the same shape with bf16 weights through the bf16 prefill GEMM (matmul_prefill_sm90a.cu, its x -> bf16
//     pass included): the base of the ratio;
//   3 act pass: the W8A8 GEMM's activation quantisation alone (path 0 minus this is the GEMM's own time).
// (Path 4, the GEMM's two-CTA multicast form, measured 0.98x of path 0 and left the code: docs/DECISIONS.md §7.)
// Counters: TFLOP/s = 2 M N K per second (the fp8 tensor cores' dense peak is about 1979 on an H200, bf16's
// 989; for path 3 it is the flops of the GEMM it serves), and x_bf16 = path 2's time / this path's (run after
// path 2 of the same shape and M; issue 30 asks >= 1.3 for path 0).
//
//   build/bin/bench_cuda_matmul_fp8_prefill
//   build/bin/bench_cuda_matmul_fp8_prefill --benchmark_filter='M:4096/'
//
// Operands are random: x N(0, 1), bf16 weights N(0, 0.05), fp8 codes uniform over the finite codes with bf16
// block scales about 0.05 / 448. Calls rotate through enough weight copies (>= 256 MB) that a call does not find
// its weight in the 50 MB L2 from the call before. Without a device every benchmark reports an error.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/step_graphs.h"
#include "core/dtype.h"
#include "cuda_bench_util.h"

namespace {

using namespace specserve;
using bench::time_calls;
using cuda::DeviceBuffer;

struct Shape {
  int64_t K;
  int parts;
  int64_t N[2];
  const char* name;
  bool swiglu = false;  // gate and up through Ops::matmul_prefill_swiglu (where it declines: the two GEMMs, swiglu)
};
constexpr Shape kShapes[] = {
    {4096, 1, {4096}, "8B q/o_proj"},        {4096, 1, {12288}, "8B gate (or up)"},
    {4096, 2, {12288, 12288}, "8B gate+up"}, {12288, 1, {4096}, "8B down_proj"},
    {17408, 1, {5120}, "27B down_proj"},     {4096, 2, {12288, 12288}, "8B gate+up SwiGLU form", true},
};
constexpr const char* kPaths[] = {"fp8 W8A8", "fp8 dequant", "bf16", "act pass"};

DeviceBuffer random_block(size_t bytes, uint32_t seed, int kind) {  // kind 0: f32 N(0,1); 1: bf16; 2: e4m3
  constexpr size_t kBlock = size_t{16} << 20;
  std::mt19937 rng(seed);
  std::vector<uint8_t> host(std::min(kBlock, bytes));
  if (kind == 2) {
    for (auto& c : host) {
      c = static_cast<uint8_t>(rng());
      if ((c & 0x7f) == 0x7f) c ^= 1;
    }
  } else if (kind == 1) {
    auto* p = reinterpret_cast<uint16_t*>(host.data());
    for (size_t i = 0; i < host.size() / 2; ++i) p[i] = f32_to_bf16(std::normal_distribution<float>(0, 0.05f)(rng));
  } else {
    auto* p = reinterpret_cast<float*>(host.data());
    for (size_t i = 0; i < host.size() / 4; ++i) p[i] = std::normal_distribution<float>(0, 1)(rng);
  }
  DeviceBuffer b(bytes);
  for (size_t off = 0; off < bytes; off += kBlock) b.upload(host.data(), std::min(kBlock, bytes - off), off);
  return b;
}

std::map<std::pair<int64_t, int64_t>, double>& bf16_times() {
  static std::map<std::pair<int64_t, int64_t>, double> t;
  return t;
}

void BM_Fp8Prefill(benchmark::State& st) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const Shape s = kShapes[st.range(0)];
  const int64_t M = st.range(1), K = s.K;
  const int path = int(st.range(2));
  const bool bf16 = path == 2;
  size_t call_bytes = 0;
  for (int p = 0; p < s.parts; ++p) call_bytes += size_t(s.N[p] * K) * (bf16 ? 2 : 1);
  const int copies = int(std::max<size_t>(1, ((size_t{256} << 20) + call_bytes - 1) / call_bytes));
  std::vector<std::vector<DeviceBuffer>> w(size_t(s.parts));
  std::vector<DeviceBuffer> scales, ys;
  for (int p = 0; p < s.parts; ++p) {
    for (int c = 0; c < copies; ++c)
      w[size_t(p)].push_back(random_block(size_t(s.N[p] * K) * (bf16 ? 2 : 1), uint32_t(p + 1), bf16 ? 1 : 2));
    const int64_t sn = (s.N[p] + 127) / 128, sk = (K + 127) / 128;
    std::vector<float> sc(size_t(sn * sk));
    std::mt19937 rng(11);
    for (auto& v : sc)
      v = bf16_to_f32(f32_to_bf16(std::uniform_real_distribution<float>(0.9f, 1.1f)(rng) * 0.05f / 448));
    scales.push_back(DeviceBuffer::from(sc));
    ys.emplace_back(size_t(M * s.N[p]) * 4);
  }
  DeviceBuffer x = random_block(size_t(M * K) * 4, 3, 0);
  const TensorView X = TensorView::contiguous(x.data(), DType::F32, {M, K}, Device::CUDA);
  auto call = [&](int i) {
    const int c = i % copies;
    if (path == 3) {
      cuda::kernels::fp8_quantize_activations(static_cast<const float*>(x.data()), K, M, K, cuda::launch_stream());
      return;
    }
    std::vector<TensorView> wv, yv;
    for (int p = 0; p < s.parts; ++p) {
      TensorView W = TensorView::contiguous(w[size_t(p)][size_t(c)].data(), bf16 ? DType::BF16 : DType::F8_E4M3,
                                            {s.N[p], K}, Device::CUDA);
      if (!bf16) W.scales = static_cast<const float*>(scales[size_t(p)].data());
      wv.push_back(W);
      yv.push_back(TensorView::contiguous(ys[size_t(p)].data(), DType::F32, {M, s.N[p]}, Device::CUDA));
    }
    if (s.swiglu) {
      if (!cuda_ops().matmul_prefill_swiglu(X, wv[0], wv[1], yv[0])) {
        cuda_ops().matmul_multi_prefill(X, wv, yv);
        cuda_ops().swiglu(yv[0], yv[1], yv[0]);
      }
    } else if (s.parts == 1) {
      cuda_ops().matmul_prefill(X, wv[0], yv[0]);
    } else {
      cuda_ops().matmul_multi_prefill(X, wv, yv);
    }
  };
  const bool w8a8_was = cuda::kernels::set_matmul_fp8_w8a8(path != 1);
  time_calls(copies, call);  // warm up (the kernels' one-time setup, the scratch blocks' growth)
  const int calls = std::max(copies, 8);
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(calls, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  cuda::kernels::set_matmul_fp8_w8a8(w8a8_was);
  const double t = seconds / double(st.iterations());
  double flops = 0;
  for (int p = 0; p < s.parts; ++p) flops += 2.0 * double(M) * double(s.N[p]) * double(K);
  st.SetLabel(std::string(s.name) + " " + kPaths[path]);
  st.counters["TFLOP/s"] = flops / t / 1e12;
  if (bf16) bf16_times()[{st.range(0), M}] = t;
  const auto base = bf16_times().find({st.range(0), M});
  if (base != bf16_times().end()) st.counters["x_bf16"] = base->second / t;
}

BENCHMARK(BM_Fp8Prefill)
    ->ArgNames({"shape", "M", "path"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t i = 0; i < int64_t(std::size(kShapes)); ++i)
        for (int64_t m : {512, 2048, 4096})
          for (int64_t path : {2, 0, 1, 3}) b->Args({i, m, path});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
