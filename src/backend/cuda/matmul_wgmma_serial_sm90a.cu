// The slice-serial warpgroup matmul (matmul_wgmma.cuh: WgSerial; sm_90a only, like
// matmul_wgmma_sm90a.cu): y[M, N] = x[M, K] · w[N, K]ᵀ for bf16 weights, each CTA one 128 x 128 output
// tile over the whole of K.
//
// Numerics: those of every tensor-core kernel (the contract heading matmul_tensor_core.cu): x's bf16
// copy, the K slices of k_split(N, K), one wgmma k16 step per chunk of a slice in increasing k from +0
// (a fresh accumulator per slice; never a chunk past the slice's end), and the slices' partials summed
// left to right in f32, ((p0 + p1) + p2) + ... (sum_slices). The cluster kernels sum the partials of
// S CTAs through distributed shared memory; here one CTA holds the running total in registers and
// adds each slice's partial to it the moment the slice ends: the same additions in the same order.
//
// Pipeline: producer warps (kProducerWarps) copy K tile g into stage g % kStages with cp.async, after
// the consumers have handed that stage back (mbarrier `empty`); once the copies of tile g have landed
// (cp.async.wait_group, kLoadsInFlight tiles later) each producer thread fences them for the async proxy
// and arrives on `full`. The consumer warpgroups wait on `full`, issue the tile's wgmma, keep one tile's
// wgmma in flight and hand back the stage of the tile before. No __syncthreads in the loop.
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "backend/cuda/matmul_wgmma.cuh"
#include "backend/cuda/matmul_wgmma_ptx.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;
using namespace specserve::cuda::wg;
using T = WgSerial;

// A producer thread's pieces of a stage: pieces i = ptid + kProducerThreads j (piece_of) of the A and
// of the B tile share k8 = (ptid / 8) % 8 and have rows row0 + j * kRowStep, row0 = (ptid / 64) * 8 +
// ptid % 8, at shared offsets 16 i.
static_assert(T::kProducerThreads % 64 == 0 && T::kBM == T::kBN, "whole 8-row groups per round of pieces");
static_assert(T::kProducerThreads % 128 == 0 && T::kConsumerThreads % 128 == 0, "roles by whole warpgroups");
static_assert(T::kProducerThreads * T::kProducerRegs + T::kConsumerThreads * T::kConsumerRegs <= 65536,
              "the register file");

__global__ void __launch_bounds__(T::kThreads, 1) matmul_wgmma_serial_kernel(const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_begin();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * T::kStages];  // full[0..S), then empty[0..S)
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  const uint32_t sbase = smem_addr(smem_raw) + pad;
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[T::kStages]);
  const int tid = static_cast<int>(threadIdx.x);
  // full: every producer thread; empty: one arrival a consumer warp
  init_ring_barriers(tid, full0, empty0, T::kStages, T::kProducerThreads, T::kConsumerThreads / 32);
  __syncthreads();

  const TileId t = tile_of(blockIdx.x, p.nbm, p.nbn, p.group);
  const int64_t m0 = t.mb * T::kBM, n0 = t.nb * T::kBN;
  const int64_t ntiles = serial_tiles(p.chunks, p.cps);
  constexpr int kChunks = kKT / kMmaK;

  // The role by warpgroup, read through a shuffle so the compiler knows it is uniform in each warp (a
  // branch it thought divergent would serialise the wgmma).
  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (warpgroup < T::kProducerThreads / 128) {
    // ---- producer ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::kProducerRegs));
    constexpr int kRowStep = T::kProducerThreads / 8;
    constexpr int kPieces = T::kBM / kRowStep;  // per operand (kBM == kBN)
    const int ptid = tid, row0 = (ptid / 64) * 8 + ptid % 8, k8 = (ptid / 8) % 8;
    const int64_t xrows = xb_rows(p.M);
    const uint16_t* a_src = p.xb + (m0 + row0) * p.ldxb + 8 * k8;
    const uint16_t* b_src = p.w + (n0 + row0) * p.ldw + 8 * k8;
    uint32_t a_ok = 0, b_ok = 0;
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      if (m0 + row0 + j * kRowStep < xrows) a_ok |= 1u << j;
      if (n0 + row0 + j * kRowStep < p.N) b_ok |= 1u << j;
    }
    const uint32_t dst0 = sbase + static_cast<uint32_t>(tile_off(row0, k8));
    SerialWalk walk(0, p.chunks, p.cps);
#pragma unroll 1
    for (int64_t g = 0; g < ntiles + T::kLoadsInFlight; ++g) {
      if (g < ntiles) {
        const int stage = static_cast<int>(g % T::kStages);
        if (g >= T::kStages) mbar_wait(empty0 + 8 * stage, static_cast<uint32_t>((g / T::kStages - 1) & 1));
        const SerialTile st = walk.tile();
        walk.next();
        const int64_t k = st.chunk0 * kMmaK;  // + 8 k8: this thread's column
        const bool k_ok = k + 8 * k8 < p.K;   // K % 8 == 0: a piece is all in or all out
        const uint32_t d = dst0 + static_cast<uint32_t>(stage * T::kStageBytes);
#pragma unroll
        for (int j = 0; j < kPieces; ++j) {
          const bool ok = (a_ok >> j) & 1u;
          cp_async_cg(d + 16 * T::kProducerThreads * j, ok ? a_src + j * kRowStep * p.ldxb + k : p.xb, ok ? 16 : 0);
        }
#pragma unroll
        for (int j = 0; j < kPieces; ++j) {
          const bool ok = ((b_ok >> j) & 1u) && k_ok;
          cp_async_cg(d + T::kABytes + 16 * T::kProducerThreads * j, ok ? b_src + j * kRowStep * p.ldw + k : p.w,
                      ok ? 16 : 0);
        }
      }
      cp_async_commit();  // (an empty group past the last tile keeps the count of groups in step)
      const int64_t ready = g - T::kLoadsInFlight;
      if (ready >= 0) {
        cp_async_wait<T::kLoadsInFlight>();  // this thread's copies of tile `ready` have landed
        fence_proxy_async();                 // ... and are visible to wgmma
        mbar_arrive(full0 + 8 * static_cast<uint32_t>(ready % T::kStages));
      }
    }
    return;
  }

  // ---- consumers ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::kConsumerRegs));
  const int ctid = tid - T::kProducerThreads, warp = ctid >> 5, lane = ctid & 31;
  const int wgi = warp / 4;  // rows 64 * wgi .. of the tile
  float acc[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f, total[i] = 0.0f;
  int64_t release = -1;  // a tile whose stage is still to be handed back
  SerialWalk walk(0, p.chunks, p.cps);
#pragma unroll 1
  for (int64_t g = 0; g < ntiles; ++g, walk.next()) {
    const int stage = static_cast<int>(g % T::kStages);
    mbar_wait(full0 + 8 * stage, static_cast<uint32_t>((g / T::kStages) & 1));
    const SerialTile st = walk.tile();
    const uint32_t a = sbase + static_cast<uint32_t>(stage * T::kStageBytes + wgi * 64 * 128);
    const uint32_t b = sbase + static_cast<uint32_t>(stage * T::kStageBytes + T::kABytes);
    auto mma = [&](int kk) { wgmma_m64n128k16(acc, smem_desc(a + kk * kChunkStep), smem_desc(b + kk * kChunkStep)); };
    wgmma_fence();
    if (st.chunk0 + kChunks <= st.chunk_end) {  // straight-line issue
#pragma unroll
      for (int kk = 0; kk < kChunks; ++kk) mma(kk);
    } else {  // the slice's last tile: never an mma past its last chunk
#pragma unroll
      for (int kk = 0; kk < kChunks - 1; ++kk)
        if (st.chunk0 + kk < st.chunk_end) mma(kk);
    }
    wgmma_commit();
    if (st.last_of_slice) {
      wgmma_wait<0>();  // the slice's chain is complete: add it to the total, in slice order
      if (st.slice == 0) {
#pragma unroll
        for (int i = 0; i < 64; ++i) total[i] = acc[i];
      } else {
#pragma unroll
        for (int i = 0; i < 64; ++i) total[i] = total[i] + acc[i];
      }
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      __syncwarp();
      if (release >= 0 && lane == 0) mbar_arrive(empty0 + 8 * static_cast<uint32_t>(release % T::kStages));
      if (lane == 0) mbar_arrive(empty0 + 8 * static_cast<uint32_t>(stage));
      release = -1;
    } else {
      wgmma_wait<1>();  // the previous tile's wgmma are done: its stage goes back
      __syncwarp();
      if (release >= 0 && lane == 0) mbar_arrive(empty0 + 8 * static_cast<uint32_t>(release % T::kStages));
      release = g;
    }
  }
  // Accumulator i of this thread: row 16 * (warp % 4) + lane / 4 + 8 * (i % 4 / 2) of the warpgroup's
  // 64, column 8 * (i / 4) + 2 * (lane % 4) + i % 2 (the m16n8 C fragment, repeated along n).
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int64_t r = m0 + 64 * wgi + 16 * (warp % 4) + lane / 4 + 8 * (i % 4 / 2);
    const int64_t c = n0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    if (r < p.M && c < p.N) p.y[r * p.ldy + c] = total[i];
  }
#endif
}

}  // namespace

bool wgmma_serial_fits(const MatmulArgs& a) {
  const bool aligned = (reinterpret_cast<uintptr_t>(a.w) & 15u) == 0 && (a.N == 1 || a.ldw % 8 == 0);
  return a.w_bf16 && aligned && a.K % 8 == 0 && a.K > 0 && a.M > 0 && a.N > 0;
}

void matmul_bf16_wgmma_serial(const MatmulArgs& a, const uint16_t* xb, int64_t ldxb, cudaStream_t stream) {
  static_assert(T::kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 block may have");
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_wgmma_serial_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  });
  Params p = make_params<T>(a.x, a.ldx, static_cast<const uint16_t*>(a.w), a.ldw, a.y, a.ldy, a.M, a.N, a.K);
  p.xb = xb;
  p.ldxb = ldxb;
  const int64_t ctas = p.nbm * p.nbn;
  if (ctas > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_pdl(matmul_wgmma_serial_kernel, dim3(static_cast<unsigned>(ctas)), T::kThreads, T::kSmemBytes, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
