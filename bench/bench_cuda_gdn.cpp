// CUDA chunked Gated DeltaNet rule (prefill spans, GdnSpan::chunked) on qwen3.6-27b's linear-attention
// layer (16 key heads, 48 value heads, dk = dv = 128), inputs from gdn_prepare on random rows (unit q
// and k, g < 0, beta in (0, 1)), each span from its own state. Span sets: one 8,192-row span, four
// 2,048-row spans (four sequences' prefill chunks in one call) and one 2,048-row span (one sequence in
// the engine's default --prefill-chunk), through Ops::gated_delta_rule (gated_deltanet_chunked.cu: the
// parallel prep kernel, the sequential state kernel and the parallel output kernel, with the op's staging
// and scratch). The forms measured against it and removed are in docs/DECISIONS.md §4. Per call:
//   GFLOP/s   the chunked form's products per second: per chunk of L rows and value head
//             2 (2 L^2 dk + L^2 dk + L^2 dv + 2 L dk dv + L^2 dv + L dk dv) (K K^T and Q K^T, W, U,
//             W S and (e^G Q) S, P V', the state's addition)
//   Mrows/s   rows (tokens) per second through one layer's rule
//
//   build/bin/bench_cuda_gdn [--benchmark_filter='spans:0']
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/device_buffer.h"
#include "backend/ops.h"
#include "cuda_bench_util.h"

namespace {

using namespace specserve;
using bench::time_calls;
using cuda::DeviceBuffer;

constexpr GdnDims kDims{16, 48, 128, 128, 4};  // qwen3.6-27b's linear-attention layer

struct SpanSet {
  int64_t spans, rows;
  const char* name;
};
constexpr SpanSet kSpanSets[] = {{1, 8192, "1 x 8192"}, {4, 2048, "4 x 2048"}, {1, 2048, "1 x 2048"}};

DeviceBuffer random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return DeviceBuffer::from(v);
}

// The products of the chunked form over a span of `rows` rows from position 0, every value head.
double chunked_flops(const GdnDims& d, int64_t rows) {
  double f = 0;
  for (int64_t r = 0; r < rows; r += kGdnChunk) {
    const double L = double(std::min<int64_t>(kGdnChunk, rows - r)), dk = d.k_dim, dv = d.v_dim;
    f += 2.0 * (2 * L * L * dk + L * L * dk + L * L * dv + 2 * L * dk * dv + L * L * dv + L * dk * dv);
  }
  return f * d.num_v_heads;
}

void BM_GdnChunked(benchmark::State& st) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const SpanSet& set = kSpanSets[st.range(0)];
  const GdnDims& d = kDims;
  const int64_t T = set.spans * set.rows, Hv = d.num_v_heads;
  DeviceBuffer qkv = random_floats(size_t(T * d.conv_dim()), 1), g = random_floats(size_t(T * Hv), 2),
               beta = random_floats(size_t(T * Hv), 3), a_log = random_floats(size_t(Hv), 4, 0.5f),
               dt_bias = random_floats(size_t(Hv), 5, 0.5f), out(size_t(T * d.value_dim()) * 4);
  const TensorView Qkv = TensorView::contiguous(qkv.data(), DType::F32, {T, d.conv_dim()}, Device::CUDA);
  const TensorView G = TensorView::contiguous(g.data(), DType::F32, {T, Hv}, Device::CUDA);
  const TensorView Beta = TensorView::contiguous(beta.data(), DType::F32, {T, Hv}, Device::CUDA);
  const TensorView O = TensorView::contiguous(out.data(), DType::F32, {T, d.value_dim()}, Device::CUDA);
  cuda_ops().gdn_prepare(Qkv, G, Beta, TensorView::contiguous(a_log.data(), DType::F32, {Hv}, Device::CUDA),
                         TensorView::contiguous(dt_bias.data(), DType::F32, {Hv}, Device::CUDA), d);
  std::vector<DeviceBuffer> states;
  std::vector<GdnSpan> spans;
  for (int64_t s = 0; s < set.spans; ++s) {
    states.push_back(random_floats(size_t(d.state_floats()), 10 + uint32_t(s), 0.3f));
    spans.push_back({states.back().as<float>(), s * set.rows, set.rows, 0, true});
  }
  auto call = [&](int) { cuda_ops().gated_delta_rule(Qkv, G, Beta, spans, d, O); };
  time_calls(1, call);  // warm up (attribute setup, scratch, staging)
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(3, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  const double t = seconds / double(st.iterations());
  st.SetLabel(std::string("27B ") + set.name + " Ops::gated_delta_rule");
  st.counters["GFLOP/s"] = chunked_flops(d, set.rows) * double(set.spans) / t / 1e9;
  st.counters["Mrows/s"] = double(T) / t / 1e6;
}

BENCHMARK(BM_GdnChunked)
    ->ArgName("spans")
    ->DenseRange(0, int64_t(std::size(kSpanSets)) - 1)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
