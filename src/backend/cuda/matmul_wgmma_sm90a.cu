// y[M, N] = x[M, K] · w[N, K]ᵀ for bf16 weights on Hopper's warpgroup tensor-core instructions
// (wgmma.mma_async, sm_90a only: this file is built for sm_90a alone, and the launcher runs it only on
// a device of compute capability 9.0). Shapes, layout and the numerics argument: matmul_wgmma.cuh; the
// contract: the header of matmul_tensor_core.cu.
//
// CTA b owns slice b % S of output tile b / S (tile_of order, as the mma.sync tiled kernel). Its
// threads stream the slice's k through kStages shared-memory stages with cp.async (x from its bf16
// copy, zero past the copy's rows; the weights zero past N and K; each thread's addresses set up once,
// WgLoader); each stage, each warpgroup issues one wgmma.m64n128k16 per chunk of the slice in that
// stage (never one past the slice's end) on its 64 rows. The plain main loop waits for them before the
// next stage's barrier; the pipelined one (up to 128 rows) leaves them running while the next stage's
// are issued and loads one tile less far ahead. With S > 1 the partial tiles are summed through the
// cluster in slice order (cluster_reduce).
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
#include "backend/matmul_choice.h"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;
using namespace specserve::cuda::wg;

// Stage `stage` <- the K tile from k0 of x's rows m0 .. m0 + BM - 1 (from the bf16 copy: xrows rows of
// pitch ldxb, whole pieces) and of w's rows n0 .. n0 + BN - 1: the general path (any K, unaligned w).
// Only 32-bit shared addresses: a generic pointer live across the main loop cost registers (spills).
template <class T>
__device__ __forceinline__ void wg_load_stage(const Params& p, uint32_t sbase, int stage, int64_t m0, int64_t n0,
                                              int64_t k0, int64_t xrows, int tid) {
  const uint32_t a = sbase + static_cast<uint32_t>(stage * T::kStageBytes), b = a + T::kABytes;
  for (int i = tid; i < T::kBM * kKT / 8; i += T::kThreads) {
    const Piece pc = piece_of(i);
    const int64_t m = m0 + pc.row;
    cp_async_ca(a + tile_off(pc.row, pc.k8), m < xrows ? p.xb + m * p.ldxb + k0 + 8 * pc.k8 : p.xb, m < xrows ? 16 : 0);
  }
  for (int i = tid; i < T::kBN * kKT / 8; i += T::kThreads) {
    const Piece pc = piece_of(i);
    const int64_t n = n0 + pc.row, k = k0 + 8 * pc.k8;
    const int bytes = n >= p.N || k >= p.K ? 0 : p.K - k >= 8 ? 16 : static_cast<int>(p.K - k) * 2;
    const uint32_t dst = b + tile_off(pc.row, pc.k8);
    if (p.vec_w) {
      cp_async_cg(dst, bytes ? p.w + n * p.ldw + k : p.w, bytes);  // zero past `bytes`
    } else {
      for (int e = 0; e < 8; ++e) {
        const uint16_t v = 2 * e < bytes ? p.w[n * p.ldw + k + e] : uint16_t{0};
        asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(dst + 2 * e), "h"(v) : "memory");
      }
    }
  }
}

// A thread's pieces of every stage, set up once (the main loop was bound by instruction issue with the
// pieces' addresses recomputed per stage: ncu, ~650 instructions per warp and stage). With kThreads a
// multiple of 64, the pieces i = tid + kThreads * j of a thread (piece_of) share k8 = (tid / 8) % 8
// and have rows row0 + j * kRowStep, row0 = (tid / 64) * 8 + tid % 8, at shared offsets 16 i.
template <class T>
struct WgLoader {
  static_assert(T::kThreads % 64 == 0, "whole 8-row groups per round of pieces");
  static constexpr int kRowStep = T::kThreads / 8;
  static constexpr int kAPieces = T::kBM / kRowStep, kBPieces = T::kBN / kRowStep;
  const uint16_t* a = nullptr;  // x's copy at (m0 + row0, slice start + 8 k8)
  const uint16_t* b = nullptr;  // w at (n0 + row0, slice start + 8 k8)
  int64_t lda = 0, ldb = 0;
  uint32_t dst = 0;             // shared address of piece tid in stage 0
  uint32_t a_ok = 0, b_ok = 0;  // bit j: piece j's row is inside x's copy / below N
};

// Tile t of the slice (from k = slice start + 64 t) into stage `stage`, when the whole tile is below K
// and w is 16-byte aligned: the same bytes wg_load_stage copies.
template <class T>
__device__ __forceinline__ void wg_load_fast(const Params& p, const WgLoader<T>& l, int stage, int64_t t) {
  const uint32_t d = l.dst + static_cast<uint32_t>(stage * T::kStageBytes);
#pragma unroll
  for (int j = 0; j < WgLoader<T>::kAPieces; ++j) {
    const bool ok = (l.a_ok >> j) & 1u;
    cp_async_ca(d + 16 * T::kThreads * j, ok ? l.a + j * WgLoader<T>::kRowStep * l.lda + t * kKT : p.xb, ok ? 16 : 0);
  }
#pragma unroll
  for (int j = 0; j < WgLoader<T>::kBPieces; ++j) {
    const bool ok = (l.b_ok >> j) & 1u;
    cp_async_cg(d + T::kABytes + 16 * T::kThreads * j, ok ? l.b + j * WgLoader<T>::kRowStep * l.ldb + t * kKT : p.w,
                ok ? 16 : 0);
  }
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) matmul_wgmma_kernel(const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_begin();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The stages start on a 1024-byte boundary (the 128-byte swizzle's period; kSmemBytes has the slack).
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wgi = warp / 4;  // this thread's warpgroup: rows 64 * wgi .. of the tile
  const uint32_t sbase = smem_addr(smem_raw) + pad;
  constexpr int kChunks = kKT / kMmaK;

  const int64_t pid = blockIdx.x / p.S;
  const Slice sl = slice_of(p, blockIdx.x % p.S);
  const int64_t ktiles = sl.tiles(kKT);
  const TileId t = tile_of(pid, p.nbm, p.nbn, p.group);
  const int64_t m0 = t.mb * T::kBM, n0 = t.nb * T::kBN;
  const int64_t xrows = xb_rows(p.M);

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

  WgLoader<T> ld;
  {
    const int row0 = (tid / 64) * 8 + tid % 8, k8 = (tid / 8) % 8;
    ld.lda = p.ldxb;
    ld.ldb = p.ldw;
    ld.a = p.xb + (m0 + row0) * p.ldxb + sl.k0() + 8 * k8;
    ld.b = p.w + (n0 + row0) * p.ldw + sl.k0() + 8 * k8;
    ld.dst = sbase + static_cast<uint32_t>(tile_off(row0, k8));  // piece j: + 16 kThreads j
#pragma unroll
    for (int j = 0; j < WgLoader<T>::kAPieces; ++j)
      if (m0 + row0 + j * WgLoader<T>::kRowStep < xrows) ld.a_ok |= 1u << j;
#pragma unroll
    for (int j = 0; j < WgLoader<T>::kBPieces; ++j)
      if (n0 + row0 + j * WgLoader<T>::kRowStep < p.N) ld.b_ok |= 1u << j;
  }
  auto load = [&](int stage, int64_t t) {
    if (p.vec_w && sl.k0() + (t + 1) * kKT <= p.K)
      wg_load_fast<T>(p, ld, stage, t);
    else
      wg_load_stage<T>(p, sbase, stage, m0, n0, sl.k0() + t * kKT, xrows, tid);
  };

  // Tiles in flight ahead of the one in the mma: Stages - 1, or Stages - 2 when pipelined (the stage of
  // tile kt - 1 may still be read by its wgmma while tile kt's are issued).
  constexpr int kAhead = T::kPipelined ? T::kStages - 2 : T::kStages - 1;
#pragma unroll 1
  for (int s = 0; s < kAhead; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
#pragma unroll 1
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kAhead - 1>();  // this thread's copies of tile kt have landed
    fence_proxy_async();          // ... and are visible to wgmma
    // Everyone's have; and every warpgroup is done with tile kt - 1 (or, pipelined, kt - 2): the stage
    // the next load takes is free.
    __syncthreads();
    const int64_t next = kt + kAhead;
    if (next < ktiles) load(static_cast<int>(next % T::kStages), next);
    cp_async_commit();
    // (A warpgroup wholly below the last row still issues its mma, on zero rows: a branch on the
    // warpgroup would make ptxas serialise every wgmma.)
    const uint32_t a = sbase + static_cast<uint32_t>((kt % T::kStages) * T::kStageBytes + wgi * 64 * 128);
    const uint32_t b = sbase + static_cast<uint32_t>((kt % T::kStages) * T::kStageBytes + T::kABytes);
    const int64_t chunk0 = sl.begin + kt * kChunks;
    auto mma = [&](int kk) { wgmma_m64n128k16(acc, smem_desc(a + kk * kChunkStep), smem_desc(b + kk * kChunkStep)); };
    wgmma_fence();
    if (chunk0 + kChunks <= sl.end) {  // straight-line issue (a branch between wgmma costs a sync)
#pragma unroll
      for (int kk = 0; kk < kChunks; ++kk) mma(kk);
    } else {  // the slice's last stage: never an mma past its last chunk
#pragma unroll
      for (int kk = 0; kk < kChunks - 1; ++kk)
        if (chunk0 + kk < sl.end) mma(kk);
    }
    wgmma_commit();
    if constexpr (T::kPipelined)
      wgmma_wait<1>();  // tile kt - 1's wgmma are done; tile kt's may run on
    else
      wgmma_wait<0>();
  }
  wgmma_wait<0>();
  // Accumulator i of this thread: row 16 * (warp % 4) + lane / 4 + 8 * (i % 4 / 2) of the warpgroup's
  // 64, column 8 * (i / 4) + 2 * (lane % 4) + i % 2 (the m16n8 C fragment, repeated along n).
  auto for_each_acc = [&](auto put) {
#pragma unroll
    for (int i = 0; i < 64; ++i)
      put(64 * wgi + 16 * (warp % 4) + lane / 4 + 8 * (i % 4 / 2), 8 * (i / 4) + 2 * (lane % 4) + i % 2, acc[i]);
  };
  if (p.S == 1) {
    for_each_acc([&](int r, int c, float v) {
      if (m0 + r < p.M && n0 + c < p.N) p.y[(m0 + r) * p.ldy + n0 + c] = v;
    });
    return;
  }
  cp_async_wait_all();
  __syncthreads();
  float* part = reinterpret_cast<float*>(smem_raw + pad);
  for_each_acc([&](int r, int c, float v) { part[r * T::kBN + c] = v; });
  cluster_reduce(p, m0, n0, T::kBM, T::kBN, part);
#endif
}

// One launch over x's bf16 copy xb (pitch ldxb = xb_pitch(K, kKT)).
template <class T>
void launch(const MatmulArgs& a, const uint16_t* xb, int64_t ldxb, cudaStream_t stream) {
  static_assert(T::kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 block may have");
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_wgmma_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  Params p = make_params<T>(a.x, a.ldx, static_cast<const uint16_t*>(a.w), a.ldw, a.y, a.ldy, a.M, a.N, a.K);
  p.xb = xb;
  p.ldxb = ldxb;
  const int64_t ctas = p.nbm * p.nbn * p.S;
  if (ctas > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_clusters(matmul_wgmma_kernel<T>, dim3(static_cast<unsigned>(ctas)), T::kThreads, T::kSmemBytes, stream, p);
}

// Whether an M-row launch runs the pipelined main loop: up to 128 rows (measured 8-19 % faster at 128
// rows on the 8B and 27B shapes; at 2,048 rows the plain loop, two CTAs per multiprocessor, is 3-15 %
// faster: docs/DECISIONS.md, matmul). The same bits either way.
bool wgmma_pipelined(int64_t M) { return M <= 128; }

template <bool Pipelined>
void launch_shape(const MatmulArgs& a, WgKind k, const uint16_t* xb, int64_t ldxb, cudaStream_t stream) {
  if (k == WgKind::M128)
    launch<WgM128<Pipelined>>(a, xb, ldxb, stream);
  else
    launch<WgM64<Pipelined>>(a, xb, ldxb, stream);
}

// Whether an M x N launch takes the slice-serial kernel: when K is split (S > 1; with S = 1 the two
// kernels do the same work and the cluster kernel's two CTAs per multiprocessor win) and its 128 x 128
// tiles fill at least 2.5 waves of the multiprocessors (one CTA each): measured 1.2-1.5x faster at
// 2,048 rows for S = 8 shapes, +4-7 % for the 8B's gate+up at 256-2,048 rows, and slower with fewer
// tiles (27B up_proj at 128 rows, 1.03 waves: -24 %; docs/DECISIONS.md, matmul). The same bits either way.
// The rule is backend/matmul_choice.h's (matmul_wgmma_serial), so the plan and the launch agree.
static_assert(WgSerial::kBM == kWgmmaSerialTile && WgSerial::kBN == kWgmmaSerialTile);
bool wgmma_serial(const MatmulArgs& a) {
  return wgmma_serial_fits(a) && matmul_wgmma_serial(a.M, a.K, matmul_weight(a), sm_count());
}

void launch_kind(const MatmulArgs& a, int kind, const uint16_t* xb, int64_t ldxb, cudaStream_t stream) {
  if ((kind < 0 && wgmma_serial(a)) || (kind == static_cast<int>(WgKind::Serial) && wgmma_serial_fits(a)))
    return matmul_bf16_wgmma_serial(a, xb, ldxb, stream);
  const WgKind k = kind >= 0 && kind != static_cast<int>(WgKind::Serial)
                       ? static_cast<WgKind>(kind)
                       : choose_wgmma_tile(a.M, a.N, sm_count(), k_split(a.N, a.K, split_target_ctas()).S);
  if (wgmma_pipelined(a.M))
    launch_shape<true>(a, k, xb, ldxb, stream);
  else
    launch_shape<false>(a, k, xb, ldxb, stream);
}

// Whether this process may run the wgmma kernel: a device of compute capability 9.0 (the sm_90a code
// runs nowhere else; elsewhere the mma.sync tiled kernel serves these rows).
bool wgmma_enabled() {
  static const bool enabled = [] {
    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major == 9 && minor == 0;
  }();
  return enabled;
}

}  // namespace

bool wgmma_available() { return wgmma_enabled(); }

bool matmul_bf16_wgmma(const MatmulArgs& a, cudaStream_t stream, int kind) {
  if (!wgmma_enabled()) return false;
  const int64_t ldxb = xb_pitch(a.K, kKT);
  launch_kind(a, kind, matmul_x_to_bf16(a.x, a.ldx, a.M, a.K, ldxb, stream), ldxb, stream);
  return true;
}

bool matmul_bf16_wgmma_multi(const MatmulArgs* parts, int count, cudaStream_t stream) {
  if (count < 1 || !wgmma_enabled()) return false;
  const MatmulArgs& a0 = parts[0];
  if (a0.M <= gemv_max_rows() || a0.K <= 0) return false;
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    if (!a.w_bf16 || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K || a.N <= 0) return false;
  }
  const int64_t ldxb = xb_pitch(a0.K, kKT);
  const uint16_t* xb = matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, ldxb, stream);
  for (int i = 0; i < count; ++i) launch_kind(parts[i], -1, xb, ldxb, stream);
  return true;
}

}  // namespace specserve::cuda::kernels
