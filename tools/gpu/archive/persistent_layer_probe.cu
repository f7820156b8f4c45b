// Probe: would a persistent layer kernel bring the batch-1 decode to 85 % of the copy roofline?
//
// The decode's matmuls stream at ~91 % of the copy bandwidth, but between them ~26 µs an 8B layer of small
// kernels (norms, head preparation, attention and its combine, swiglu) leave the DRAM idle
// (docs/history/GPU_PERF_NOTES.md, sessions 10 and 12). A kernel that stays resident across the layer could keep
// the weights streaming into its shared memory while it runs the small phases between grid barriers. This
// probe measures that design on an emulated qwen3-8b step (36 layers of q/k/v, o, gate/up and down bf16
// weights, 512 positions of f32 KV cache, batch 1) before anyone builds it for real:
//
//   separate  one kernel per phase, with programmatic dependent launch and the matmul's first D chunks
//             issued before griddepcontrol.wait (the shape of today's step), replayed as a CUDA graph;
//   drain     one cooperative kernel, phases separated by grid barriers, each matmul's stream started
//             after the barrier before it (what barriers alone give);
//   cross     the same kernel, but each warp's ring of weight chunks runs on across the barriers: while
//             the CTA does a norm, the attention or the swiglu, the next matmul's chunks are landing.
//
// The matmuls are simple warp-streaming gemvs (each warp a contiguous run of 2 KB chunks through a ring
// of D stages, cp.async; x in shared memory; a row's partial sums added atomically), the same code in all
// three. The numerics are not the server's (atomics, one-pass softmax); only the time is measured, and
// the three variants' outputs are compared to catch a probe that skips work.
// The emulated layer (shapes, buffers, the small phases) is in persistent_layer_phases.cuh; this file has the
// weight ring, the grid barrier, the kernels and the timing.
//
//   /usr/local/cuda/bin/nvcc -std=c++20 -arch=sm_90 -O2 --expt-relaxed-constexpr -I src -o persistent_layer_probe \
//       tools/gpu/archive/persistent_layer_probe.cu
//   ./persistent_layer_probe          (on an H100 / H200)
//
// H200 (driver 580.159.04, 2026-12-01; copy 4.26 TB/s, the step's 14.04 GB -> floor 3.30 ms, 85 %: 3.88 ms):
//   the matmuls' stream alone, one kernel, no phases        3.21 ms  102 %  (reads outrun the copy roofline)
//   the 144 matmuls as separate PDL launches (graph)        3.67 ms   90 %  (3.2 us a launch boundary)
//   separate kernels, the whole step (D = 4..10)            4.74-4.79 ms  69 %
//   persistent, barriers, each stream after its barrier     5.09-5.26 ms  63-65 %
//   persistent, barriers, the ring running across them      4.94-4.99 ms  66-67 %
// So grid barriers cost more than PDL kernel boundaries (the drain variant is 0.35-0.47 ms slower than
// separate kernels), and streaming across them wins back only 0.1-0.3 ms: the ring (up to 21 MB, ~5 us of
// the stream) fills during the first microseconds of each gap, then the stream waits like the others. The
// layer's chain of ~9 dependent phases, each a global synchronisation plus a few L2 round trips, is what
// bounds the step, whichever way the phases are launched.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "persistent_layer_phases.cuh"
#include "probe_util.h"

namespace {

using namespace plp;

constexpr int kChunkElems = 1024;  // bf16 per warp chunk: 4 rows x 256 k (lane: 8 k of each row)
constexpr int kChunkK = 256, kChunkRows = 4;
constexpr int kXsFloats = kInter;   // x of the widest K
constexpr int kPhasesPerLayer = 4;  // matmuls: qkv, o, gate/up, down

// cp.async and griddepcontrol: the server's own wrappers.
using specserve::cuda::pdl_wait;
using specserve::cuda::tc::cp_async_commit;
using specserve::cuda::tc::cp_async_wait;
using specserve::cuda::tc::cp_async_wait_all;
using specserve::cuda::tc::smem_addr;
__device__ __forceinline__ void pdl_trigger() { specserve::cuda::pdl_launch_dependents(); }

// Grid barrier of a cooperative launch: arrive, the last one bumps the generation.
__device__ void grid_barrier(unsigned* bar, unsigned& gen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned g = gen;
    __threadfence();
    if (atomicAdd(&bar[0], 1u) == gridDim.x - 1) {
      atomicExch(&bar[0], 0u);
      __threadfence();
      atomicExch(&bar[1], g + 1);
    } else {
      unsigned v;
      do {
        asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(&bar[1]));
      } while (v == g);
    }
  }
  gen += 1;
  __syncthreads();
}

// cp.async.wait_group with a runtime count (D - 2 groups may stay in flight).
__device__ __forceinline__ void wait_ahead(int ahead) {
  switch (ahead) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    case 8: cp_async_wait<8>(); break;
    case 9: cp_async_wait<9>(); break;
    case 10: cp_async_wait<10>(); break;
    case 11: cp_async_wait<11>(); break;
    default: cp_async_wait<12>(); break;
  }
}

// A warp's run of weight chunks in one matmul: chunks [first, first + count) of the matrix, chunk c being
// rows 4 (c / per_group) .. + 3 at k = 256 (c % per_group): every lane reads the same 8 x for its 4 rows.
struct Job {
  const uint16_t* w = nullptr;
  long long first = 0;
  int count = 0, per_group = 1, K = 0;  // chunks per 4-row group (K / 256)
  long long g0 = 0;                     // the first chunk's group and k step
  int kq0 = 0;
};
// A chunk cursor that steps without dividing (64-bit divisions per chunk made the loop issue-bound).
struct Cursor {
  long long g;
  int kq;
  __device__ void step(int per_group) {
    if (++kq == per_group) {
      kq = 0;
      ++g;
    }
  }
};
__device__ Job job_of(const Mat& m, int gwarp, int nwarps) {
  Job j;
  const long long total = static_cast<long long>(m.N) * m.K / kChunkElems;
  const long long per = (total + nwarps - 1) / nwarps;
  j.w = m.w;
  j.first = gwarp * per;
  const long long left = total - j.first;
  j.count = static_cast<int>(left <= 0 ? 0 : left < per ? left : per);
  j.per_group = m.K / kChunkK;
  j.K = m.K;
  j.g0 = j.first / j.per_group;
  j.kq0 = static_cast<int>(j.first % j.per_group);
  return j;
}

// A warp's ring of D chunk stages over a sequence of matmuls (phases p0 .. p1 - 1 of the step). Issue
// runs ahead of consumption by D - 1 chunks; with one phase per stream it stops at the phase's end.
struct Stream {
  const Mat* mats;
  int p1;
  int ip, ii;        // issue cursor: phase, chunk in phase
  int islot, cslot;  // the ring stages of the next chunk issued and consumed (mod D, without dividing)
  int gwarp, nwarps, D;
  uint32_t ring;  // this warp's stages
  Job job;        // the issue phase's job
  Cursor ic;      // its chunk ii

  __device__ void begin(const Mat* m, int p0, int p1_, uint32_t ring_, int D_) {
    mats = m;
    p1 = p1_;
    ip = p0;
    ii = 0;
    islot = cslot = 0;
    gwarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
    nwarps = gridDim.x * kWarps;
    D = D_;
    ring = ring_;
    job = job_of(mats[ip], gwarp, nwarps);
    ic = Cursor{job.g0, job.kq0};
  }
  // Issues the next chunk (or an empty group past the end).
  __device__ void issue() {
    while (ip < p1 && ii >= job.count) {
      ++ip;
      ii = 0;
      if (ip < p1) {
        job = job_of(mats[ip], gwarp, nwarps);
        ic = Cursor{job.g0, job.kq0};
      }
    }
    if (ip < p1) {
      const int lane = threadIdx.x & 31;
      const uint16_t* src = job.w + ic.g * kChunkRows * job.K + ic.kq * kChunkK + lane * 8;
      ic.step(job.per_group);
      const uint32_t dst = ring + static_cast<uint32_t>(islot) * (kChunkElems * 2);
#pragma unroll
      for (int i = 0; i < kChunkRows; ++i)
        specserve::cuda::tc::cp_async_cg(dst + (i * 32 + lane) * 16, src + static_cast<long long>(i) * job.K, 16);
      ++ii;
      if (++islot == D) islot = 0;
    }
    cp_async_commit();
  }
  __device__ void prologue() {
    for (int i = 0; i < D - 1; ++i) issue();
  }
  // Consumes this warp's chunks of matrix m (the phase now due): y[row] += chunk . xs[k0 ..].
  __device__ void consume(const Mat& m, const float* xs, float* y) {
    const Job j = job_of(m, gwarp, nwarps);
    const int lane = threadIdx.x & 31;
    float acc[kChunkRows] = {};
    long long group = -1;
    Cursor cc{j.g0, j.kq0};
    auto flush = [&] {
      if (group < 0) return;
#pragma unroll
      for (int i = 0; i < kChunkRows; ++i) {
        const float s = warp_sum(acc[i]);
        if (lane == 0) atomicAdd(&y[group * kChunkRows + i], s);
        acc[i] = 0.0f;
      }
    };
    for (int c = 0; c < j.count; ++c) {
      wait_ahead(D - 2);  // this chunk's group landed (D - 1 + c groups committed before it)
      __syncwarp();       // every lane's pieces did, and every lane is done with the previous chunk
      issue();            // chunk consumed + D - 1 into the previous chunk's stage
      if (cc.g != group) {
        flush();
        group = cc.g;
      }
      const int k0 = cc.kq * kChunkK + lane * 8;
      cc.step(j.per_group);
      const float4 x0 = *reinterpret_cast<const float4*>(xs + k0);
      const float4 x1 = *reinterpret_cast<const float4*>(xs + k0 + 4);
      const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      const uint32_t slot = static_cast<uint32_t>(cslot) * (kChunkElems * 2);
#pragma unroll
      for (int i = 0; i < kChunkRows; ++i) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(ring + slot + (i * 32 + lane) * 16));
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[i] = fmaf(__uint_as_float(u[e] << 16), x[2 * e], acc[i]);
          acc[i] = fmaf(__uint_as_float(u[e] & 0xffff0000u), x[2 * e + 1], acc[i]);
        }
      }
      if (++cslot == D) cslot = 0;
    }
    flush();
  }
};

// ---- shared memory: [xs: kXsFloats][ring: kWarps x D x 2 KB]; the attention borrows xs for its tile.
__host__ __device__ constexpr int smem_bytes(int D) { return kXsFloats * 4 + kWarps * D * kChunkElems * 2; }
__device__ uint32_t ring_of_warp(unsigned char* smem, int D) {
  return smem_addr(smem + kXsFloats * 4) + static_cast<uint32_t>((threadIdx.x >> 5) * D * kChunkElems * 2);
}

// ---- the persistent kernel (cooperative launch, one CTA per SM).
__global__ void __launch_bounds__(kThreads, 1) persistent_step(Buffers b, int D, int cross) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float red[kWarps];
  float* xs = reinterpret_cast<float*>(smem);
  const uint32_t ring = ring_of_warp(smem, D);
  const int cta = blockIdx.x;
  unsigned gen = 0;
  Stream st;
  if (cross) {
    st.begin(b.mats, 0, kLayers * kPhasesPerLayer, ring, D);
    st.prologue();
  }
  auto start = [&](int p) {
    if (cross) return;
    st.begin(b.mats, p, p + 1, ring, D);
    st.prologue();
  };
  if (cross == 2) {  // the matmuls' stream alone: no small phases, no barriers, x fixed
    fill_x(xs, b.h, kInter);
    for (int p = 0; p < kLayers * kPhasesPerLayer; ++p) st.consume(b.mats[p], xs, out_of(b, p / 4, p % 4));
    cp_async_wait_all();
    return;
  }
  for (int l = 0; l < kLayers; ++l) {
    const int p = l * kPhasesPerLayer;
    start(p);
    fill_x_norm(b, xs, res_row(b, l - 1, 1), l > 0 ? out_of(b, l - 1, 3) : nullptr, res_row(b, l, 0), cta == 0, red);
    st.consume(b.mats[p], xs, out_of(b, l, 0));
    grid_barrier(b.bar, gen);
    head_prep(b, l, cta, red);
    grid_barrier(b.bar, gen);
    attention(b, l, cta, xs);
    grid_barrier(b.bar, gen);
    combine(b, cta);
    grid_barrier(b.bar, gen);
    start(p + 1);
    fill_x(xs, b.attn, kHidden);
    st.consume(b.mats[p + 1], xs, out_of(b, l, 1));
    grid_barrier(b.bar, gen);
    start(p + 2);
    fill_x_norm(b, xs, res_row(b, l, 0), out_of(b, l, 1), res_row(b, l, 1), cta == 0, red);
    st.consume(b.mats[p + 2], xs, out_of(b, l, 2));
    grid_barrier(b.bar, gen);
    swiglu(b, l, cta, gridDim.x);
    grid_barrier(b.bar, gen);
    start(p + 3);
    fill_x(xs, b.h, kInter);
    st.consume(b.mats[p + 3], xs, out_of(b, l, 3));
    grid_barrier(b.bar, gen);
  }
  cp_async_wait_all();
}

// ---- one kernel per phase (programmatic dependent launch: weights before the wait).
__global__ void __launch_bounds__(kThreads, 1) k_gemv(Buffers b, int p, const float* x, int n, int D) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* xs = reinterpret_cast<float*>(smem);
  Stream st;
  st.begin(b.mats, p, p + 1, ring_of_warp(smem, D), D);
  st.prologue();
  pdl_wait();
  pdl_trigger();
  fill_x(xs, x, n);
  st.consume(b.mats[p], xs, out_of(b, p / kPhasesPerLayer, p % kPhasesPerLayer));
  cp_async_wait_all();
}
__global__ void k_norm(Buffers b, int l, int which) {
  __shared__ float red[kWarps];
  __shared__ float xs[kHidden];
  pdl_wait();
  pdl_trigger();
  if (which == 0)
    fill_x_norm(b, xs, res_row(b, l - 1, 1), l > 0 ? out_of(b, l - 1, 3) : nullptr, res_row(b, l, 0), true, red);
  else
    fill_x_norm(b, xs, res_row(b, l, 0), out_of(b, l, 1), res_row(b, l, 1), true, red);
  for (int i = threadIdx.x; i < kHidden; i += kThreads) b.xnorm[i] = xs[i];
}
__global__ void k_head_prep(Buffers b, int l) {
  __shared__ float red[kWarps];
  pdl_wait();
  pdl_trigger();
  head_prep(b, l, blockIdx.x, red);
}
__global__ void k_attention(Buffers b, int l) {
  extern __shared__ __align__(16) unsigned char smem[];
  pdl_wait();
  pdl_trigger();
  attention(b, l, blockIdx.x, reinterpret_cast<float*>(smem));
}
__global__ void k_combine(Buffers b) {
  pdl_wait();
  pdl_trigger();
  combine(b, blockIdx.x);
}
__global__ void k_swiglu(Buffers b, int l) {
  pdl_wait();
  pdl_trigger();
  swiglu(b, l, blockIdx.x, gridDim.x);
}

__global__ void fill_bf16(uint16_t* w, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float v = (static_cast<int>(h & 0xffff) - 32768) * (0.03f / 32768.0f);
    w[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
}
__global__ void fill_f32(float* x, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2246822519u ^ seed;
    h ^= h >> 16;
    h *= 2654435761u;
    h ^= h >> 13;
    x[i] = (static_cast<int>(h & 0xffff) - 32768) * (scale / 32768.0f);
  }
}

template <class... A>
void launch(void (*k)(A...), int grid, int smem, cudaStream_t s, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

}  // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int dmax = 10;
  CK(cudaFuncSetAttribute(persistent_step, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes(dmax)));
  CK(cudaFuncSetAttribute(k_gemv, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes(dmax)));
  CK(cudaFuncSetAttribute(k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, kXsFloats * 4));

  // Weights: 36 layers of q/k/v [6144, 4096], o [4096, 4096], gate/up [24576, 4096], down [4096, 12288].
  const int shapes[4][2] = {{kQkv, kHidden}, {kHidden, kHidden}, {2 * kInter, kHidden}, {kHidden, kInter}};
  size_t per_layer = 0;
  for (auto& sh : shapes) per_layer += size_t(sh[0]) * sh[1];
  uint16_t* w = nullptr;
  CK(cudaMalloc(&w, per_layer * kLayers * 2));
  fill_bf16<<<4 * sms, 256>>>(w, per_layer * kLayers, 7u);
  std::vector<Mat> mats;
  size_t off = 0;
  for (int l = 0; l < kLayers; ++l)
    for (auto& sh : shapes) {
      mats.push_back(Mat{w + off, sh[0], sh[1]});
      off += size_t(sh[0]) * sh[1];
    }
  Buffers b{};
  Mat* dm = nullptr;
  CK(cudaMalloc(&dm, mats.size() * sizeof(Mat)));
  CK(cudaMemcpy(dm, mats.data(), mats.size() * sizeof(Mat), cudaMemcpyHostToDevice));
  b.mats = dm;
  auto falloc = [](size_t n) {
    float* p = nullptr;
    CK(cudaMalloc(&p, n * 4));
    CK(cudaMemset(p, 0, n * 4));
    return p;
  };
  float* norm_w = falloc(kHidden);
  fill_f32<<<16, 256>>>(norm_w, kHidden, 3u, 1.0f);
  b.norm_w = norm_w;
  b.resid = falloc(size_t(kLayers + 1) * 2 * kHidden);
  fill_f32<<<16, 256>>>(b.resid, 2 * kHidden, 5u, 1.0f);  // res[-1] (the input row: index 1 of layer -1)
  const size_t kv_floats = size_t(kLayers) * kKvHeads * kCtx * 2 * kHd;
  b.kv = falloc(kv_floats);
  fill_f32<<<4 * sms, 256>>>(b.kv, kv_floats, 9u, 1.0f);
  b.qh = falloc(kHidden);
  b.part = falloc(size_t(kHeads) * kChunks * (kHd + 2));
  b.attn = falloc(kHidden);
  b.h = falloc(kInter);
  b.xnorm = falloc(kHidden);
  const size_t out_floats = size_t(kLayers) * (kQkv + kHidden + 2 * kInter + kHidden);
  float* outs = falloc(out_floats);
  b.qkv = outs;
  b.o = b.qkv + size_t(kLayers) * kQkv;
  b.gu = b.o + size_t(kLayers) * kHidden;
  b.down = b.gu + size_t(kLayers) * 2 * kInter;
  unsigned* bar = nullptr;
  CK(cudaMalloc(&bar, 8));
  b.bar = bar;
  CK(cudaDeviceSynchronize());

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  const double copy_gbs = probe_copy_bandwidth(s);
  const double bytes = double(per_layer) * 2 * kLayers + double(kLayers) * kKvHeads * kCtx * 2 * kHd * 4;
  const double floor_ms = bytes / (copy_gbs * 1e9) * 1e3;
  printf("%s, %d SMs; copy %.0f GB/s; step %.2f GB -> floor %.3f ms (85%%: %.3f ms)\n", prop.name, sms, copy_gbs,
         bytes / 1e9, floor_ms, floor_ms / 0.85);

  auto reset = [&] {
    CK(cudaMemsetAsync(outs, 0, out_floats * 4, s));
    CK(cudaMemsetAsync(bar, 0, 8, s));
  };
  auto time_it = [&](auto&& step, int reps) {
    std::vector<float> t;
    for (int i = 0; i < reps + 2; ++i) {
      reset();
      CK(cudaEventRecord(e0, s));
      step();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 2) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::vector<float> ref(kHidden), got(kHidden);
  auto check = [&](const char* name, float ms, bool first) {
    CK(cudaMemcpy(got.data(), b.down + size_t(kLayers - 1) * kHidden, kHidden * 4, cudaMemcpyDeviceToHost));
    if (first) ref = got;
    double mx = 0, diff = 0;
    for (int i = 0; i < kHidden; ++i) {
      mx = std::max(mx, double(std::fabs(ref[i])));
      diff = std::max(diff, double(std::fabs(ref[i] - got[i])));
    }
    printf("%-28s %8.3f ms  %5.1f%% of the copy roofline   (last layer's output: max |x| %.3g, max diff %.3g)\n", name,
           ms, 100.0 * floor_ms / ms, mx, diff);
  };

  const int reps = 15;
  bool first = true;
  for (int D : {4, 6, 8, 10}) {
    const int smem = smem_bytes(D);
    // One kernel per phase, as a graph.
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < kLayers; ++l) {
      const int p = l * kPhasesPerLayer;
      launch(k_norm, 1, 0, s, b, l, 0);
      launch(k_gemv, sms, smem, s, b, p, static_cast<const float*>(b.xnorm), kHidden, D);
      launch(k_head_prep, kHeads + kKvHeads, 0, s, b, l);
      launch(k_attention, kKvHeads * kChunks, kXsFloats * 4, s, b, l);
      launch(k_combine, kHeads, 0, s, b);
      launch(k_gemv, sms, smem, s, b, p + 1, static_cast<const float*>(b.attn), kHidden, D);
      launch(k_norm, 1, 0, s, b, l, 1);
      launch(k_gemv, sms, smem, s, b, p + 2, static_cast<const float*>(b.xnorm), kHidden, D);
      launch(k_swiglu, sms, 0, s, b, l);
      launch(k_gemv, sms, smem, s, b, p + 3, static_cast<const float*>(b.h), kInter, D);
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    char name[64];
    snprintf(name, sizeof name, "separate kernels, D=%d", D);
    check(name, time_it([&] { CK(cudaGraphLaunch(ge, s)); }, reps), first);
    first = false;
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    // The 144 matmul launches alone (the same graph without the small kernels).
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int p = 0; p < kLayers * kPhasesPerLayer; ++p)
      launch(k_gemv, sms, smem, s, b, p, static_cast<const float*>(b.h), p % 4 == 3 ? kInter : kHidden, D);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    {
      const float ms = time_it([&] { CK(cudaGraphLaunch(ge, s)); }, reps);
      printf("%-28s %8.3f ms  %5.1f%% of the copy roofline\n", "separate, matmuls only", ms, 100.0 * floor_ms / ms);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));

    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_step, kThreads, smem));
    if (per_sm < 1) {
      printf("persistent kernel does not fit at D=%d\n", D);
      continue;
    }
    for (int cross : {2, 0, 1}) {
      int dd = D, cc = cross;
      void* args[] = {&b, &dd, &cc};
      snprintf(name, sizeof name, "persistent %s, D=%d", cross == 2 ? "matmuls only" : cross ? "cross" : "drain", D);
      const float ms =
          time_it([&] { CK(cudaLaunchCooperativeKernel((void*)persistent_step, sms, kThreads, args, smem, s)); }, reps);
      if (cross == 2)
        printf("%-28s %8.3f ms  %5.1f%% of the copy roofline (weights only: %.1f%%)\n", name, ms, 100.0 * floor_ms / ms,
               100.0 * (double(per_layer) * 2 * kLayers / (copy_gbs * 1e9) * 1e3) / ms);
      else
        check(name, ms, false);
    }
  }
  // The time of the output reset alone (included in every number above).
  printf("output reset alone: %.3f ms\n", time_it([] {}, reps));
  return 0;
}
