// The W8A8 prefill GEMM (MatmulKernel::Fp8Prefill; sm_90a only): y[M, N] = x[M, K] · w[N, K]ᵀ for block-scaled
// fp8 weights (e4m3 codes [N, K], f32 scales [ceil(N / 128), scale_ld] over 128 x 128 blocks) on the Hopper fp8
// tensor cores, as vLLM / SGLang / DeepGEMM run Qwen's FP8 checkpoints: x is quantised per row and group of 128
// columns (matmul_fp8_act_quant.cu, the rule in matmul_fp8_act_math.cuh), then each output element is
//
//   acc = +0;  for each 128-column block b of K, in increasing b:
//     t   = Σ over the block's k of code_x[m, k] · code_w[n, k]     (four wgmma k32 steps into a fresh f32 tile)
//     acc = fmaf(t, f32_rn(a_scale[m, b] · w_scale[n / 128, b]), acc)
//
// (DeepGEMM's "promotion": the tensor cores' fp8 sums keep fewer bits than f32 — about 14 by DeepSeek-V3's
// measurement — so a sum runs over one block only and the f32 total is kept in registers.) Past K the TMA boxes
// read zeros (codes +0 on both sides), which add nothing.
//
// Numerics — deterministic per row (docs/DESIGN.md §1.2, as the bf16 prefill GEMM): a row's codes and scales
// depend on its own x row and K; each element's chain is over the blocks of K in order, the tile shape (128 x
// 128 x 128) is fixed, K is never split, no reduction crosses CTAs, and a wgmma step computes each row of its
// 64-row output from that row of A alone. So a prefill row has the same bits in any chunking of its prompt and
// beside any rows. They are not the bits of the bf16 dequantisation (Fp8Dequant, the contract of backend/ops.h
// for the other orders): the activations are rounded to e4m3, not bf16.
//
// Tile choice: 128 x 128 (two consumer warpgroups of m64n128) with one stage = one 128-column k block (a
// 128-byte swizzle row holds exactly one scale block). A consumer holds 64 f32 totals and 64 for the block's
// sum (128 registers of the 232 setmaxnreg gives it); m64n256 would need 256 and spill. The weight scale is one
// value per (tile, block), since a tile's 128 columns are one scale block. Wider tiles (two m64n128 per
// warpgroup, 256 x 128) would halve the B traffic per flop but need 192 accumulator registers and more
// promotion work between the tensor-core bursts: a later step if the measurement asks for it.
//
// Pipeline (one CTA per multiprocessor, persistent), as matmul_prefill_sm90a.cu: warpgroup 0 is the producer
// (one thread issues, per k block, the TMA loads of x's 128 x 128 code tile, w's 128 x 128 code tile and the 128
// activation scales of the tile's rows into one of kStages stages, and arms the stage's `full` barrier); warpgroups
// 1 and 2 are consumers: wait for the stage, issue the block's four wgmma m64n128k32 into the block tile, wait for
// them, read their rows' activation scales, hand the stage back (`empty`), promote. While one consumer promotes,
// the other's wgmma run. Up to four weights that share x per launch (q/k/v, gate/up), tiles walked M fastest.
//
// L2 traffic: a 128 x 128 x 128 stage is 32.5 KB for 4.2 MFLOP — at the fp8 rate that is more L2 -> SM bandwidth
// than the bf16 GEMM's 128 x 256 x 64 tiles draw (48 KB per 4.2 MFLOP at half the rate). Clusters of two CTAs
// on vertically adjacent tiles, each loading half of the shared weight tile and multicasting it (24.5 KB a
// stage per CTA), measured 0.98x of this form (docs/DECISIONS.md §2) and left the code (§7).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <climits>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_act_math.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_wgmma.cuh"
#include "backend/cuda/matmul_wgmma_fp8_ptx.cuh"
#include "backend/cuda/matmul_wgmma_ptx.cuh"
#include "backend/cuda/step_graphs.h"
#include "backend/cuda/tma_map.h"
#include "core/error.h"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;
using namespace specserve::cuda::wg;

struct Fp8Gemm {
  static constexpr int kBM = 128, kBN = 128, kBK = 128, kStages = 6, kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = kBM * kBK, kBBytes = kBN * kBK;  // one byte a code
  static constexpr int kTileBytes = kABytes + kBBytes;
  static constexpr int kScaleBytes = kBM * 4;  // the activation scales of the tile's rows for one block
  static constexpr int kStageTx = kTileBytes + kScaleBytes;
  // The code tiles start on 1024-byte boundaries (the swizzle's period); the scales follow all of them.
  static constexpr int kSmemBytes = kTileBytes * kStages + kScaleBytes * kStages + 1024;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kMmaK = 32;  // k per wgmma step (32 codes = 32 bytes of a swizzled row)
};
static_assert(Fp8Gemm::kBK == fp8a::kGroup, "one stage is one scale block of K");
static_assert(Fp8Gemm::kBN == fp8a::kGroup, "a tile's columns are one weight scale block");
static_assert(Fp8Gemm::kBK == 128, "a 128-code row of a tile is the 128-byte swizzle's width");
static_assert(128 * Fp8Gemm::kProducerRegs + 256 * Fp8Gemm::kConsumerRegs <= 65536, "the register file");
static_assert(Fp8Gemm::kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 block may have");

struct Fp8Part {
  CUtensorMap b;  // w's codes [N, K] (stride ldw bytes), box 128 x 128
  const float* w_scales;
  int64_t scale_ld;
  float* y;
  int64_t ldy;
  int64_t N;
  int tiles_end;
  bool pairs;  // y and ldy allow 8-byte stores of column pairs
};
constexpr int kMaxParts = 4;
struct Fp8Params {
  CUtensorMap a;   // x's codes [M, K] (pitch code_pitch(K)), box 128 x 128
  CUtensorMap sa;  // x's group scales, transposed [groups, M] (pitch scale_pitch(M)), box 128 x 1
  Fp8Part part[kMaxParts];
  int64_t M;
  int kblocks, tiles_m, tiles;
};

struct TileAt {
  int part;
  int64_t m0, n0;
};
// Tile t (128 x 128): its part, first row and first column; p.tiles_m counts the tiles along M.
__device__ __forceinline__ TileAt tile_at(const Fp8Params& p, int t) {
  int i = 0;
  while (t >= p.part[i].tiles_end) ++i;
  const int local = t - (i > 0 ? p.part[i - 1].tiles_end : 0);
  const int64_t m = int64_t{local % p.tiles_m} * Fp8Gemm::kBM;
  return {i, m, int64_t{local / p.tiles_m} * Fp8Gemm::kBN};
}

__global__ void __launch_bounds__(Fp8Gemm::kThreads, 1) matmul_prefill_fp8_kernel(const __grid_constant__ Fp8Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_begin();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * Fp8Gemm::kStages];  // full[0..S), then empty[0..S)
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  const uint32_t sbase = smem_addr(smem_raw) + pad;
  const uint32_t scale_base = sbase + Fp8Gemm::kTileBytes * Fp8Gemm::kStages;
  const float* scale_smem = reinterpret_cast<const float*>(smem_raw + pad + Fp8Gemm::kTileBytes * Fp8Gemm::kStages);
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[Fp8Gemm::kStages]);
  const int tid = static_cast<int>(threadIdx.x);
  const int first = static_cast<int>(blockIdx.x);
  const int step = static_cast<int>(gridDim.x);
  // full: the producer thread; empty: one arrival a consumer warp
  init_ring_barriers(tid, full0, empty0, Fp8Gemm::kStages, 1, Fp8Gemm::kConsumers * 4);
  __syncthreads();

  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (warpgroup == 0) {
    // ---- producer: one thread issues every load ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Fp8Gemm::kProducerRegs));
    if (tid == 0) {
      uint32_t it = 0;
      for (int t = first; t < p.tiles; t += step) {
        const TileAt at = tile_at(p, t);
        const int m0 = static_cast<int>(at.m0), n0 = static_cast<int>(at.n0);
        const CUtensorMap* b_map = &p.part[at.part].b;
        for (int kb = 0; kb < p.kblocks; ++kb, ++it) {
          const uint32_t stage = it % Fp8Gemm::kStages;
          if (it >= Fp8Gemm::kStages) mbar_wait(empty0 + 8 * stage, (it / Fp8Gemm::kStages - 1) & 1u);
          const uint32_t dst = sbase + stage * Fp8Gemm::kTileBytes, bar = full0 + 8 * stage;
          mbar_arrive_expect_tx(bar, Fp8Gemm::kStageTx);
          tma_load_2d(dst, &p.a, kb * Fp8Gemm::kBK, m0, bar);
          tma_load_2d(dst + Fp8Gemm::kABytes, b_map, kb * Fp8Gemm::kBK, n0, bar);
          tma_load_2d(scale_base + stage * Fp8Gemm::kScaleBytes, &p.sa, m0, kb, bar);
        }
      }
    }
    __syncwarp();
  } else {
    // ---- consumers ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Fp8Gemm::kConsumerRegs));
    const int ctid = tid - 128, warp = ctid >> 5, lane = ctid & 31;
    const int wgi = warp / 4;                                       // rows 64 * wgi .. of the tile
    const int row_in_tile = 64 * wgi + 16 * (warp % 4) + lane / 4;  // this thread's first row (the other: + 8)
    float acc[64], blk[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) blk[i] = 0.0f;
    uint32_t it = 0;
    for (int t = first; t < p.tiles; t += step) {
      const TileAt at = tile_at(p, t);
      const int64_t m0 = at.m0, n0 = at.n0;
      const Fp8Part& part = p.part[at.part];
      const float* w_scales = part.w_scales + (n0 / Fp8Gemm::kBN) * part.scale_ld;
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      for (int kb = 0; kb < p.kblocks; ++kb, ++it) {
        const float ws = __ldg(w_scales + kb);
        const uint32_t stage = it % Fp8Gemm::kStages;
        mbar_wait(full0 + 8 * stage, (it / Fp8Gemm::kStages) & 1u);
        const uint32_t a = sbase + stage * Fp8Gemm::kTileBytes + wgi * 64 * 128;
        const uint32_t b = sbase + stage * Fp8Gemm::kTileBytes + Fp8Gemm::kABytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Fp8Gemm::kBK / Fp8Gemm::kMmaK; ++kk)
          wgmma_m64n128k32_e4m3(blk, smem_desc(a + kk * kChunkStep), smem_desc(b + kk * kChunkStep), kk);
        wgmma_commit();
        wgmma_wait<0>();
        const float* sa = scale_smem + stage * (Fp8Gemm::kScaleBytes / 4);
        const float sa0 = sa[row_in_tile], sa1 = sa[row_in_tile + 8];
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * stage);
        const float s0 = __fmul_rn(sa0, ws), s1 = __fmul_rn(sa1, ws);
        // Accumulator i: row row_in_tile + 8 (i % 4 / 2), column 8 (i / 4) + 2 (lane % 4) + i % 2.
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = fmaf(blk[i], (i & 2) ? s1 : s0, acc[i]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = m0 + row_in_tile + 8 * h;
        if (r >= p.M) continue;
        float* yr = part.y + r * part.ldy;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int64_t c = n0 + 8 * j + 2 * (lane % 4);
          store_column_pair(yr, c, part.N, part.pairs, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }
      }
    }
  }
#endif
}

void configure_once() {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_prefill_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    Fp8Gemm::kSmemBytes));
  });
}

bool pairs_ok(const MatmulArgs& a) { return (reinterpret_cast<uintptr_t>(a.y) & 7u) == 0 && a.ldy % 2 == 0; }

}  // namespace

bool fp8_prefill_fits(const MatmulArgs& a) {
  const bool aligned = (reinterpret_cast<uintptr_t>(a.w) & 15u) == 0 && a.ldw % 16 == 0;
  return a.w_scales != nullptr && !a.w_bf16 && aligned && a.K > 0 && a.M > 0 && a.N > 0 && a.M <= INT_MAX &&
         a.N <= INT_MAX && a.K <= INT_MAX;
}

bool matmul_fp8_prefill(const MatmulArgs* parts, int count, cudaStream_t stream) {
  if (count < 1 || !wgmma_available()) return false;
  const MatmulArgs& a0 = parts[0];
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    if (!fp8_prefill_fits(a) || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K) return false;
  }
  const int64_t groups = fp8a::groups_of(a0.K);
  for (int i = 0; i < count; ++i)
    SS_CHECK(parts[i].scale_ld >= groups, "fp8 prefill matmul: scale rows of {} for K = {} ({} blocks)",
             parts[i].scale_ld, a0.K, groups);
  configure_once();
  const Fp8Activations act = fp8_quantize_activations(a0.x, a0.ldx, a0.M, a0.K, stream);
  const CUtensorMap a_map =
      e4m3_tensor_map(act.codes, a0.M, a0.K, act.pitch, Fp8Gemm::kBK, Fp8Gemm::kBM, "fp8 prefill matmul (activations)");
  const CUtensorMap sa_map =
      f32_tensor_map(act.scales, groups, a0.M, act.scale_pitch, Fp8Gemm::kBM, 1, "fp8 prefill matmul (scales)");
  const int tiles_m = static_cast<int>(tc::ceil_div(a0.M, int64_t{Fp8Gemm::kBM}));
  for (int first = 0; first < count; first += kMaxParts) {
    Fp8Params p{};
    p.a = a_map;
    p.sa = sa_map;
    p.M = a0.M;
    p.kblocks = static_cast<int>(groups);
    p.tiles_m = tiles_m;
    int64_t tiles = 0;
    const int n_parts = std::min(kMaxParts, count - first);
    for (int i = 0; i < kMaxParts; ++i) {
      Fp8Part& part = p.part[i];
      if (i >= n_parts) {
        part.tiles_end = INT_MAX;  // never reached: every launch tile is below p.tiles
        continue;
      }
      const MatmulArgs& a = parts[first + i];
      part.b = e4m3_tensor_map(a.w, a.N, a.K, a.ldw, Fp8Gemm::kBK, Fp8Gemm::kBN, "fp8 prefill matmul (weights)");
      part.w_scales = a.w_scales;
      part.scale_ld = a.scale_ld;
      part.y = a.y;
      part.ldy = a.ldy;
      part.N = a.N;
      part.pairs = pairs_ok(a);
      tiles += int64_t{tiles_m} * tc::ceil_div(a.N, int64_t{Fp8Gemm::kBN});
      SS_CHECK(tiles <= INT_MAX, "fp8 prefill matmul: {} x {} is more tiles than the kernel counts", a.M, a.N);
      part.tiles_end = static_cast<int>(tiles);
    }
    p.tiles = static_cast<int>(tiles);
    const int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
    launch_pdl(matmul_prefill_fp8_kernel, dim3(static_cast<unsigned>(grid)), Fp8Gemm::kThreads, Fp8Gemm::kSmemBytes,
               stream, p);
    CUDA_CHECK_LAUNCH();
  }
  return true;
}

}  // namespace specserve::cuda::kernels
