// The streaming bf16 tensor-core matmul (matmul_tensor_core_stream.cuh has the shape and index code):
// y[M, N] = x[M, K] · w[N, K]ᵀ for few rows, where the weights are read once and the time is the
// time to stream them from DRAM. The numerics contract is the one heading matmul_tensor_core.cu.
//
// Bytes in flight: each warp keeps two 4 KB weight tiles in flight while it works on a third; 2-3
// CTAs (8-12 warps) per multiprocessor give 64-96 KB in flight per SM, above the ~40-64 KB that the
// H200's ~31 GB/s per SM at about a microsecond of loaded DRAM latency needs. Small-N shapes get
// their CTAs from the K split (k_split): e.g. 4096 x 4096 runs 64 column blocks x 8 slices.
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_stream.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

__global__ void __launch_bounds__(Stream::kThreads, 8) matmul_tc_stream_kernel(const Params launch) {
  pdl_begin();
  int64_t block = blockIdx.x / launch.S;
  const Params p = segment_of(launch, block);
  extern __shared__ __align__(128) unsigned char smem[];
  const StreamLayout lay{p.a_rows};
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = smem_addr(smem);
  constexpr int kChunks = Stream::kKT / kMmaK;

  auto st_f32 = [&](int off, float v) { *reinterpret_cast<float*>(smem + off) = v; };
  auto st_b16 = [&](int off, uint16_t v) { *reinterpret_cast<uint16_t*>(smem + off) = v; };
  auto cp16_x = [&](int off, const float* src, int bytes) { copy_piece<true>(sbase, smem, off, src, bytes); };
  auto cp16_w = [&](int off, const uint16_t* src, int bytes) { copy_piece<false>(sbase, smem, off, src, bytes); };
  auto cvt2 = [&](int off) {
    const float2 v = *reinterpret_cast<const float2*>(smem + off);
    return pack_bf16x2(v.x, v.y);
  };

  const int64_t n0 = block * Stream::kBN, n0w = n0 + warp * Stream::kWarpN;
  const int64_t m0 = int64_t{blockIdx.y} * Stream::kBM;
  const Slice sl = slice_of(p, blockIdx.x % p.S);
  const int64_t tiles = sl.tiles(Stream::kKT);
  const int valid_rows = p.M - m0 < Stream::kBM ? static_cast<int>(p.M - m0) : Stream::kBM;

  // Weight tile t (this warp) and, every kXTiles tiles, the x window it starts (the whole CTA).
  auto issue = [&](int64_t t) {
    const int64_t k0 = sl.k0() + t * Stream::kKT;
    if (t % Stream::kXTiles == 0)
      stream_load_x(p, lay, static_cast<int>(t / Stream::kXTiles % 2), m0, k0, tid, cp16_x, st_f32);
    stream_load_w(p, lay, warp, static_cast<int>(t % Stream::kStages), n0w, k0, lane, cp16_w, st_b16);
  };

  float acc[2][4] = {};
#pragma unroll
  for (int t = 0; t < Stream::kStages - 1; ++t) {
    if (t < tiles) issue(t);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < tiles; ++kt) {
    cp_async_wait<Stream::kStages - 2>();  // this thread's copies of tile kt (and its x window) landed
    if (kt % Stream::kXTiles == 0)
      __syncthreads();  // a new x window: everyone's pieces are in, and the buffer it replaces is free
    else
      __syncwarp();  // the warp's pieces are in, and every lane is done with tile kt - 1's stage
    if (kt + Stream::kStages - 1 < tiles) issue(kt + Stream::kStages - 1);
    cp_async_commit();

    const int stage = static_cast<int>(kt % Stream::kStages);
    const int buf = static_cast<int>(kt / Stream::kXTiles % 2);
    const int kw = static_cast<int>(kt % Stream::kXTiles) * Stream::kKT;
    const int64_t chunk0 = sl.begin + kt * kChunks;
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
      if (chunk0 + kk >= sl.end) break;  // never an mma past the slice's last chunk
      uint32_t b0, b1, b2, b3, a[4];
      ldmatrix_x4(sbase + stream_b_off(lay, warp, stage, lane, kk), b0, b1, b2, b3);
      stream_gather_a(lay, buf, lane, kw + kk * kMmaK, valid_rows, a, cvt2);
      mma_bf16(acc[0], a, b0, b1);
      mma_bf16(acc[1], a, b2, b3);
    }
  }
  if (p.S == 1) {
    stream_for_each_acc(lane, warp, acc, [&](int r, int c, float v) {
      if (r < valid_rows && n0 + c < p.N) p.y[(m0 + r) * p.ldy + n0 + c] = v;
    });
    return;
  }
  cp_async_wait_all();  // (only empty groups are left; the partial has its own region anyway)
  float* part = reinterpret_cast<float*>(smem + lay.part_off());
  stream_for_each_acc(lane, warp, acc, [&](int r, int c, float v) { part[r * Stream::kBN + c] = v; });
  cluster_reduce(p, m0, n0, Stream::kBM, Stream::kBN, part);
}

void configure_stream_kernel() {
  constexpr int kMaxSmem = StreamLayout{Stream::kBM}.smem_bytes(2);
  static_assert(kMaxSmem <= 227 * 1024, "more shared memory than an sm_90 block may have");
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_stream_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
}

}  // namespace

void matmul_bf16_stream(const MatmulArgs& a, cudaStream_t stream) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;
  configure_stream_kernel();
  const Params p =
      make_stream_params(a.x, a.ldx, static_cast<const uint16_t*>(a.w), a.ldw, a.y, a.ldy, a.M, a.N, a.K);
  const int64_t gx = p.nbn * p.S;
  if (gx > INT_MAX || p.nbm > 65535)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_clusters(matmul_tc_stream_kernel, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(p.nbm)),
                  Stream::kThreads, StreamLayout{p.a_rows}.smem_bytes(p.S), stream, p);
}

bool matmul_bf16_stream_compatible(const MatmulArgs* parts, int count) {
  // The gemv kernel runs the parts up to gemv_max_rows() rows (several 16-row blocks), the stream
  // kernel up to 16.
  const int max_rows = gemv_max_rows() > Stream::kBM ? gemv_max_rows() : Stream::kBM;
  return parts_share_split(parts, count) && parts[0].M <= max_rows;
}

void matmul_bf16_stream_multi(const MatmulArgs* parts, int count, cudaStream_t stream) {
  if (!matmul_bf16_stream_compatible(parts, count))
    cuda_fail(cudaErrorInvalidValue, "matmul_bf16_stream_multi: parts do not share one streaming launch", __FILE__,
              __LINE__);
  const MatmulArgs& a0 = parts[0];
  WeightPart wp[Params::kMaxSegments];
  weight_parts(parts, count, wp);
  const Params p = make_multi_params(wp, count, [&](const WeightPart& w) {
    return make_stream_params(a0.x, a0.ldx, w.w, w.ldw, w.y, w.ldy, a0.M, w.N, a0.K);
  });
  const int64_t gx = p.nbn * p.S;
  if (gx > INT_MAX) cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  configure_stream_kernel();
  launch_clusters(matmul_tc_stream_kernel, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(p.nbm)),
                  Stream::kThreads, StreamLayout{p.a_rows}.smem_bytes(p.S), stream, p);
}

}  // namespace specserve::cuda::kernels
