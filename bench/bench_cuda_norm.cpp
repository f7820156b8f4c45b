// CUDA norms at qwen3.6-27b's prefill chunk (2,048 rows of hidden 5,120; the DeltaNet output's gated norm
// over 48 value heads of 128 per row) and at one decode row: the held-row kernels (norm.cu, variant 0)
// and the one-block-a-row kernels they replaced (norm_reference.cu, variant 1), which give the same bits.
// Per call:
//   GB/s      the bytes a call must move, per second: add_rms_norm reads x and y and writes x, out and
//             the bf16 copy (XbOut, rows x pitch x 2 bytes), 4 M d 4 + copy; rms_norm reads x, writes y
//             and the copy; rms_norm_gated reads x and z and writes y, 3 M d 4 (the weights: L2 hits)
//   of_copy   that as a fraction of the device-to-device copy bandwidth measured in the same run
//             (BM_CopyRoofline): 1.0 is the kernel at its byte floor
//
//   build/bin/bench_cuda_norm [--benchmark_filter='CopyRoofline|rows:2048/']
//
// Calls alternate between two sets of buffers (>= 150 MB each at 2,048 rows, over the 50 MB L2). Without
// a device every benchmark reports an error and exits.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_reference.h"
#include "cuda_bench_util.h"

namespace {

using namespace specserve;
using bench::BM_CopyRoofline;
using bench::copy_bandwidth;
using bench::time_calls;
using cuda::DeviceBuffer;
namespace k = cuda::kernels;

constexpr int64_t kHidden = 5120, kHeadDim = 128, kValueHeads = 48;

DeviceBuffer random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(std::min<size_t>(n, size_t{1} << 22));
  for (auto& e : v) e = nd(rng);
  DeviceBuffer b(n * 4);
  for (size_t off = 0; off < n; off += v.size()) b.upload(v.data(), std::min(v.size(), n - off) * 4, off * 4);
  return b;
}

// One set of a call's buffers: two inputs, two outputs, the bf16 copy.
struct NormSet {
  DeviceBuffer a, b, out, xb;
  k::XbOut copy;
  NormSet(int64_t rows, int64_t d, uint32_t seed)
      : a(random_floats(size_t(rows * d), seed)),
        b(random_floats(size_t(rows * d), seed + 1)),
        out(size_t(rows * d) * 4) {
    copy.pitch = (d + 15) / 16 * 16 + 128;  // xb_pitch(d, 128): the gemv's layout
    copy.rows = (rows + 15) / 16 * 16;
    xb = DeviceBuffer(size_t(copy.rows * copy.pitch) * 2);
    copy.regs = static_cast<uint32_t*>(xb.data());
  }
  float* fa() const { return static_cast<float*>(a.data()); }
  const float* fb() const { return static_cast<const float*>(b.data()); }
  float* fout() const { return static_cast<float*>(out.data()); }
};

enum class Op { AddRmsNorm, RmsNorm, Gated };

void run_norm(benchmark::State& st, Op op) {
  if (cuda::device_count() == 0) {
    st.SkipWithError("no CUDA device");
    return;
  }
  const int64_t rows = st.range(0);
  const bool reference = st.range(1) == 1;
  const int64_t groups = op == Op::Gated ? rows * kValueHeads : rows, d = op == Op::Gated ? kHeadDim : kHidden;
  const NormSet sets[2] = {NormSet(groups, d, 11), NormSet(groups, d, 21)};
  const DeviceBuffer w = random_floats(size_t(d), 31, 0.3f);
  const auto* wp = static_cast<const float*>(w.data());
  const cudaStream_t s = cuda::cuda_stream();
  auto call = [&](int i) {
    const NormSet& t = sets[i % 2];
    switch (op) {
      case Op::AddRmsNorm:
        if (reference)
          k::add_rms_norm_reference(t.fa(), t.fb(), wp, t.fout(), groups, d, 1, 1e-6f, s, t.copy);
        else
          k::add_rms_norm(t.fa(), t.fb(), wp, t.fout(), groups, d, 1, 1e-6f, s, t.copy);
        break;
      case Op::RmsNorm:
        if (reference)
          k::rms_norm_reference(t.fa(), wp, t.fout(), groups, d, 1, 1e-6f, s, t.copy);
        else
          k::rms_norm(t.fa(), wp, t.fout(), groups, d, 1, 1e-6f, s, t.copy);
        break;
      case Op::Gated:
        if (reference)
          k::rms_norm_gated_reference(t.fa(), t.fb(), wp, t.fout(), groups, d, 1e-6f, s);
        else
          k::rms_norm_gated(t.fa(), t.fb(), wp, t.fout(), groups, d, 1e-6f, s);
        break;
    }
  };
  const double elems = double(groups * d), copy_bytes = double(sets[0].copy.rows * sets[0].copy.pitch) * 2;
  const double bytes = op == Op::AddRmsNorm ? 16 * elems + copy_bytes
                       : op == Op::RmsNorm  ? 8 * elems + copy_bytes
                                            : 12 * elems;
  const double roofline = copy_bandwidth();
  time_calls(4, call);  // warm up (and the occupancy queries)
  const int calls = 50;
  double seconds = 0;
  for (auto _ : st) {
    const double t = time_calls(calls, call);
    st.SetIterationTime(t);
    seconds += t;
  }
  const double t = seconds / double(st.iterations());
  st.SetLabel(std::string(reference ? "reference" : "held") + " " + std::to_string(groups) + "x" + std::to_string(d));
  st.counters["MB"] = bytes / 1e6;
  st.counters["GB/s"] = bytes / t / 1e9;
  st.counters["of_copy"] = bytes / t / roofline;
}

void BM_AddRmsNorm(benchmark::State& st) { run_norm(st, Op::AddRmsNorm); }
void BM_RmsNorm(benchmark::State& st) { run_norm(st, Op::RmsNorm); }
void BM_RmsNormGated(benchmark::State& st) { run_norm(st, Op::Gated); }

BENCHMARK(BM_CopyRoofline)->UseManualTime()->Iterations(1);
BENCHMARK(BM_AddRmsNorm)
    ->ArgNames({"rows", "variant"})
    ->ArgsProduct({{2048, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RmsNorm)
    ->ArgNames({"rows", "variant"})
    ->ArgsProduct({{2048, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RmsNormGated)
    ->ArgNames({"rows", "variant"})
    ->ArgsProduct({{2048, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
