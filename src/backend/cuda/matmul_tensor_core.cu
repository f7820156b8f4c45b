// y[M, N] = x[M, K] · w[N, K]ᵀ for bf16 weights on the tensor cores (mma.sync m16n8k16, sm_80+), f32
// activations in and out. One kernel template serves every M (decode M = 1, verify M <= 256, prefill
// M in the thousands); only the CTA tile shape changes with M (matmul_tensor_core.cuh).
//
// NUMERICS CONTRACT (row invariance, docs/DESIGN.md §1, ops.h: a row's bits never depend on M):
//   - x is rounded to bf16 element by element, round to nearest even (cvt.rn.bf16x2.f32), as the CPU
//     AVX512-BF16 kernel rounds activations once per call. The streaming kernel rounds while it builds
//     the A fragments from its f32 copy of x in shared memory; the tiled kernel reads a bf16 copy of x
//     made by a pre-pass with the same conversion (matmul_tensor_core_xb.cuh), so an element's
//     rounding is the same in every kernel and tile shape. (A NaN stays a NaN; the bf16 weights are
//     used as they are.)
//   - K is split into S slices by k_split(N, K) (matmul_tensor_core.cuh), a function of N and K ONLY
//     (never of M, the tile shape or the device): the C = ceil(K/16) k16 chunks are cut into slices of
//     cps = ceil(C / S) consecutive chunks, slice s = chunks [s * cps, min((s + 1) * cps, C)), so
//     slice boundaries are multiples of 16 in k; S is 1, 2, 4 or 8 (S = 1: K is not split).
//   - Partial p_s[m, n] of slice s is ONE f32 accumulator, starting at +0, fed by one
//     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 per chunk of the slice, in increasing k;
//     chunk c holds k = 16c + j in mma k-slot j, and the K tail of the last chunk is zero in both
//     operands. No chunk past a slice's last is ever issued into its chain (even an all-zero mma
//     could turn a -0 into +0).
//   - y[m, n] = p_0 when S = 1, else ((p_0 + p_1) + p_2) + ... + p_{S-1}: f32 adds (round to nearest
//     even) in slice order (sum_slices), performed once per element by one thread; the S CTAs of a
//     tile form a thread-block cluster and read each other's partial tiles from shared memory. No
//     atomics, no order that depends on timing. This holds for every M (decode, verify, prefill).
//   - What may depend on M (and N): the kernel (backend/matmul_choice.h: the warp-split streaming kernel for M <= 32,
//     matmul_tensor_core_gemv.cu; from 17 to 64 rows where it fits, the 32-column split-K kernel,
//     matmul_tensor_core_mid.cu; above 32 rows the
//     Hopper warpgroup kernel, matmul_wgmma_sm90a.cu, whose wgmma k16 step gives an element the bits of
//     one mma.sync.m16n8k16 (matmul_wgmma.cuh), or where it cannot run this tiled kernel), the CTA tile (rows x columns
//     per CTA and per warp), the pipeline depth, the raster order, the 16-byte vs scalar load paths (bit copies into
//     the same shared-memory image), whether x reaches the fragments as f32 (rounded there) or as its bf16 copy
//     (rounded before), which CTA thread adds up an element's partials, and which fragment row (0..15) a row of x
//     occupies. The last one relies on the tensor core computing each output element from its own A row, B column and C
//     element alone, the same way in every fragment position; tests/backend_cuda/test_cuda_matmul_tensor_core.cpp
//     checks the bits.
//
// The tiled pipeline: the pre-pass writes x's bf16 copy; CTA b owns slice b % S of the BM x BN output
// tile b / S (tile_of order) and streams the slice's k through kStages shared-memory stages with
// cp.async (16-byte pieces; the weights zero-filled past K / N and bypassing L1). Each k16 chunk, a
// warp ldmatrix's its B fragments and, per m16 tile, its A fragment, and issues WarpM16 x WarpN8 mma.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) matmul_tc_kernel(const Params p) {
  pdl_begin();
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout<T> lay{p.a_rows};
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp / T::kWarpsN, wn = warp % T::kWarpsN;
  const uint32_t sbase = smem_addr(smem);
  constexpr int kChunks = T::kKT / kMmaK;

  auto st_b16 = [&](int off, uint16_t v) { *reinterpret_cast<uint16_t*>(smem + off) = v; };
  // x's bf16 copy covers every piece a tile loads (matmul_tensor_core_xb.cuh): always whole pieces.
  auto cp16_x = [&](int off, const uint16_t* src, int) { cp_async_ca(sbase + off, src, 16); };
  auto cp16_w = [&](int off, const uint16_t* src, int bytes) { copy_piece<false>(sbase, smem, off, src, bytes); };

  const int64_t pid = blockIdx.x / p.S;
  const Slice sl = slice_of(p, blockIdx.x % p.S);
  const int64_t ktiles = sl.tiles(T::kKT);
  const TileId t = tile_of(pid, p.nbm, p.nbn, p.group);
  const int64_t m0 = t.mb * T::kBM, n0 = t.nb * T::kBN;
  const int valid_rows = p.M - m0 < T::kBM ? static_cast<int>(p.M - m0) : T::kBM;

  float acc[T::kWarpM16][T::kWarpN8][4];
#pragma unroll
  for (int i = 0; i < T::kWarpM16; ++i)
#pragma unroll
    for (int j = 0; j < T::kWarpN8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll 1
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < ktiles) load_stage<T>(p, lay, s, m0, n0, sl.k0() + s * T::kKT, tid, cp16_x, cp16_w, st_b16);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<T::kStages - 2>();  // this thread's copies of tile kt have landed
    __syncthreads();                  // everyone's have, and everyone is done with tile kt - 1's stage
    const int64_t next = kt + T::kStages - 1;
    if (next < ktiles)
      load_stage<T>(p, lay, static_cast<int>(next % T::kStages), m0, n0, sl.k0() + next * T::kKT, tid, cp16_x, cp16_w,
                    st_b16);
    cp_async_commit();

    const int stage = static_cast<int>(kt % T::kStages);
    const int64_t chunk0 = sl.begin + kt * kChunks;
    if (!m16_active<T>(wm, 0, valid_rows)) continue;  // a warp below the tile's last row: nothing to do
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
      if (chunk0 + kk >= sl.end) break;  // never an mma past the slice's last chunk
      uint32_t b[T::kWarpN8][2];
#pragma unroll
      for (int j = 0; j < T::kWarpN8; j += 2) {
        if (j + 1 < T::kWarpN8)
          ldmatrix_x4(sbase + b_ldsm_off<T>(lay, stage, lane, wn, j, kk, true), b[j][0], b[j][1], b[j + 1][0],
                      b[j + 1][1]);
        else
          ldmatrix_x2(sbase + b_ldsm_off<T>(lay, stage, lane, wn, j, kk, false), b[j][0], b[j][1]);
      }
#pragma unroll
      for (int i = 0; i < T::kWarpM16; ++i) {
        if (!m16_active<T>(wm, i, valid_rows)) continue;
        uint32_t a[4];
        ldmatrix_x4(sbase + a_ldsm_off<T>(lay, stage, lane, wm, i, kk), a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int j = 0; j < T::kWarpN8; ++j) mma_bf16(acc[i][j], a, b[j][0], b[j][1]);
      }
    }
  }
  if (p.S == 1) {
    store_tile<T>(p, m0, n0, lane, wm, wn, acc);
    return;
  }
  // Split K: the partial tile goes into this CTA's (now idle) stages, the cluster adds them up.
  cp_async_wait_all();
  __syncthreads();
  float* part = reinterpret_cast<float*>(smem);
  for_each_acc<T>(lane, wm, wn, acc, [&](int r, int c, float v) { part[r * T::kBN + c] = v; });
  cluster_reduce(p, m0, n0, T::kBM, T::kBN, part);
}

template <class T>
void launch(const MatmulArgs& a, cudaStream_t stream) {
  constexpr int kMaxSmem = Layout<T>{T::kBM}.smem_bytes(2);
  static_assert(kMaxSmem <= 227 * 1024, "more shared memory than an sm_90 block may have");
  // Once per kernel: allow the largest layout (a_rows = BM) and prefer shared memory over L1.
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  const int64_t ldxb = xb_pitch(a.K, T::kKT);
  const uint16_t* xb = matmul_x_to_bf16(a.x, a.ldx, a.M, a.K, ldxb, stream);
  const Params p =
      make_tiled_params<T>(a.x, a.ldx, xb, ldxb, static_cast<const uint16_t*>(a.w), a.ldw, a.y, a.ldy, a.M, a.N, a.K);
  const int64_t ctas = p.nbm * p.nbn * p.S;
  if (ctas > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_clusters(matmul_tc_kernel<T>, dim3(static_cast<unsigned>(ctas)), T::kThreads,
                  Layout<T>{p.a_rows}.smem_bytes(p.S), stream, p);
}

}  // namespace

namespace {
MatmulDevice& device_facts() {
  static MatmulDevice device{sm_count(), wgmma_available()};
  return device;
}
}  // namespace

const MatmulDevice& matmul_device() { return device_facts(); }

bool set_matmul_fp8_w8a8(bool on) {
  MatmulDevice& d = device_facts();
  const bool was = d.fp8_w8a8;
  d.fp8_w8a8 = on;
  return was;
}

void matmul_bf16_tiled(const MatmulArgs& a, cudaStream_t stream) {
  matmul_bf16_tensor_core(
      a, stream, static_cast<int>(choose_tile(a.M, a.N, sm_count(), k_split(a.N, a.K, split_target_ctas()).S)));
}

void matmul_bf16_tensor_core(const MatmulArgs& a, cudaStream_t stream, int tile) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;  // matmul() handles K == 0 (y = 0)
  if (tile < 0 || tile >= kTileKinds) return matmul(a, stream);
  const TileKind kind = static_cast<TileKind>(tile);
  switch (kind) {
    case TileKind::M16: return launch<TileM16>(a, stream);
    case TileKind::M16N8: return launch<TileM16N8>(a, stream);
    case TileKind::M32N32: return launch<TileM32N32>(a, stream);
    case TileKind::M32: return launch<TileM32>(a, stream);
    case TileKind::M64N32: return launch<TileM64N32>(a, stream);
    case TileKind::M64N64: return launch<TileM64N64>(a, stream);
    case TileKind::M64: return launch<TileM64>(a, stream);
    case TileKind::M128N64: return launch<TileM128N64>(a, stream);
    case TileKind::M128: return launch<TileM128>(a, stream);
    case TileKind::Gemv: return matmul_bf16_gemv(a, stream);
    case TileKind::Wgmma64:
    case TileKind::Wgmma128:
    case TileKind::WgmmaSerial:
      if (matmul_bf16_wgmma(a, stream, static_cast<int>(kind) - static_cast<int>(TileKind::Wgmma64))) return;
      return launch<TileM128>(a, stream);
  }
}

}  // namespace specserve::cuda::kernels
