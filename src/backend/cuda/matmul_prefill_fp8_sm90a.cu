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
// 128-byte swizzle row holds exactly one scale block). A consumer holds 64 f32 totals and (plain form) two block
// tiles of 64, 192 registers of the 232 setmaxnreg gives it; m64n256 would need twice that and spill. The weight scale
// is one value per (tile, block), since a tile's 128 columns are one scale block. Wider tiles (two m64n128 per
// warpgroup, 256 x 128) would halve the B traffic per flop but need 192 accumulator registers and more
// promotion work between the tensor-core bursts: a later step if the measurement asks for it.
//
// Pipeline (one CTA per multiprocessor, persistent), as matmul_prefill_sm90a.cu: warpgroup 0 is the producer
// (one thread issues, per k block, the TMA loads of x's 128 x 128 code tile, w's 128 x 128 code tile and the 128
// activation scales of the tile's rows into one of kStages stages, and arms the stage's `full` barrier); warpgroups
// 1 and 2 are consumers: wait for the stage, read their rows' activation scales, issue the block's four wgmma
// m64n128k32 into a block tile, form the block's two scale products while the wgmma run (the weight scale was
// loaded a block ahead); the plain form then issues the next block into a second block tile before it waits for
// this one, hands its stage back (`empty`) and promotes it, so that a consumer's promotion runs under its own next
// block's wgmma as well as under the other consumer's (the SwiGLU form, below, waits and promotes each block
// before issuing the next: it holds one block tile). Up to four weights that share x per launch (q/k/v, gate/up),
// tiles walked M fastest. What the consumers spend a block on (ncu's warp-state samples, 8B q/o at 4,096 rows,
// docs/DECISIONS.md §2): a quarter waiting for their wgmma, a fifth in the 64 promotion FFMAs, most of the rest in the
// serial issue between them.
//
// The SwiGLU form (matmul_fp8_prefill_swiglu, an MLP's gate and up weights in one pass): a launch tile is 128 rows
// by one 128-column group of h = silu(x · gateᵀ) ⊙ (x · upᵀ), computed as two sub-tiles of 64 columns one after
// the other. A sub-tile's 128 B rows are 64 rows of gate and the same 64 rows of up (two TMA boxes of 64 x 128
// stacked: the 128-byte swizzle repeats every 8 rows), so a thread's accumulators j and j + 8 (of the m64n128
// fragment's 16 column groups) are gate and up of the same column of h, each promoted with its own weight's scale
// (both halves lie in one 128-row scale block). Each is the chain the plain form computes for that element, so h
// has the bits of this GEMM on gate and up, then swiglu (device_math.cuh's formula). The epilogue stores h in f32
// and, holding the first sub-tile's 32 values a thread in registers (which a second block tile would not leave
// room for), quantises the group of 128 columns by the activation rule (matmul_fp8_act_math.cuh; a row's group is one
// quad of lanes: two shuffles give its largest magnitude) into h's codes and scales, in the activation pass's layout:
// the down projection's W8A8 GEMM reads them (MatmulArgs::xq) instead of running that pass over h. Neither gate's nor
// up's f32 output is written.
//
// L2 traffic: a 128 x 128 x 128 stage is 32.5 KB for 4.2 MFLOP — at the fp8 rate that is more L2 -> SM bandwidth
// than the bf16 GEMM's 128 x 256 x 64 tiles draw (48 KB per 4.2 MFLOP at half the rate). Clusters of two CTAs
// on vertically adjacent tiles, each loading half of the shared weight tile and multicasting it (24.5 KB a
// stage per CTA), measured 0.98x of this form (docs/DECISIONS.md §2) and left the code (§7).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <climits>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_act_math.cuh"
#include "backend/cuda/matmul_prefill_fp8_tile.cuh"
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
using namespace fp8p;

// The two forms' shared memory. The plain form hands its output tile to the storer warps through a staging tile
// (the output's f32 rows, written by the consumers, read and stored by the storers while the consumers run the
// next tile's main loop), which leaves room for 4 stages; the SwiGLU form stores from registers with 6.
template <bool kSwiglu>
struct Fp8Ring {
  static constexpr bool kStaged = !kSwiglu;
  static constexpr int kStages = kSwiglu ? 6 : 4;
  // The code tiles start on 1024-byte boundaries (the swizzle's period); the scales follow all of them, then the
  // staging tile.
  static constexpr int kStagingOff = (Fp8Gemm::kTileBytes + Fp8Gemm::kScaleBytes) * kStages;
  static constexpr int kSmemBytes = kStagingOff + (kStaged ? Fp8Gemm::kStagingBytes : 0) + 1024;
  static_assert(kStages <= Fp8Gemm::kMaxStages, "the barrier array's size");
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 block may have");
};

// A block's scale products for a consumer thread's two rows (s: the weight's, u: the SwiGLU form's up weight's).
struct BlockScales {
  float s0, s1, u0, u1;
};

template <bool kSwiglu>
__global__ void __launch_bounds__(Fp8Gemm::kThreads, 1) matmul_prefill_fp8_kernel(const __grid_constant__ Fp8Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Ring = Fp8Ring<kSwiglu>;
  constexpr int kStages = Ring::kStages;
  pdl_begin();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // full[0..S), empty[0..S), then the staging tile's `staged` and `drained`
  __shared__ __align__(8) uint64_t bars[2 * Fp8Gemm::kMaxStages + 2];
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  const uint32_t sbase = smem_addr(smem_raw) + pad;
  const uint32_t scale_base = sbase + Fp8Gemm::kTileBytes * kStages;
  const float* scale_smem = reinterpret_cast<const float*>(smem_raw + pad + Fp8Gemm::kTileBytes * kStages);
  float* staging = reinterpret_cast<float*>(smem_raw + pad + Ring::kStagingOff);
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kStages]);
  const uint32_t staged = smem_addr(&bars[2 * kStages]), drained = staged + 8;
  const int tid = static_cast<int>(threadIdx.x);
  const int first = static_cast<int>(blockIdx.x);
  const int step = static_cast<int>(gridDim.x);
  // full: the producer thread; empty: one arrival a consumer warp; staged: every consumer thread; drained: every
  // storer thread
  init_ring_barriers(tid, full0, empty0, kStages, 1, Fp8Gemm::kConsumers * 4);
  if (Ring::kStaged && tid == 0) {
    mbar_init(staged, 128 * Fp8Gemm::kConsumers);
    mbar_init(drained, Fp8Gemm::kStorers);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (warpgroup == 0) {
    // ---- producer: one thread issues every load ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Fp8Gemm::kProducerRegs));
    if (tid == 0) {
      uint32_t it = 0;
      for (int t = first; t < p.tiles; t += step) {
        const TileAt at = tile_at(p, t);
        const int m0 = static_cast<int>(at.m0);
        const CUtensorMap* b_map = &p.part[at.part].b;
        const int subs = kSwiglu ? swiglu_subs(p, at) : 1;
        for (int sub = 0; sub < subs; ++sub) {
          const int n0 = static_cast<int>(at.n0) + sub * Fp8Gemm::kSubN;
          for (int kb = 0; kb < p.kblocks; ++kb, ++it) {
            const uint32_t stage = it % kStages;
            if (it >= kStages) mbar_wait(empty0 + 8 * stage, (it / kStages - 1) & 1u);
            const uint32_t dst = sbase + stage * Fp8Gemm::kTileBytes, bar = full0 + 8 * stage;
            mbar_arrive_expect_tx(bar, Fp8Gemm::kStageTx);
            tma_load_2d(dst, &p.a, kb * Fp8Gemm::kBK, m0, bar);
            if constexpr (kSwiglu) {  // gate rows n0 .. n0 + 63, then up's
              tma_load_2d(dst + Fp8Gemm::kABytes, &p.part[0].b, kb * Fp8Gemm::kBK, n0, bar);
              tma_load_2d(dst + Fp8Gemm::kABytes + Fp8Gemm::kBBytes / 2, &p.part[1].b, kb * Fp8Gemm::kBK, n0, bar);
            } else {
              tma_load_2d(dst + Fp8Gemm::kABytes, b_map, kb * Fp8Gemm::kBK, n0, bar);
            }
            tma_load_2d(scale_base + stage * Fp8Gemm::kScaleBytes, &p.sa, m0, kb, bar);
          }
        }
      }
    } else if (Ring::kStaged && tid >= 32) {
      store_staged_tiles(p, staging, staged, drained, tid - 32);
    }
    __syncwarp();
  } else {
    // ---- consumers ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Fp8Gemm::kConsumerRegs));
    const int ctid = tid - 128, warp = ctid >> 5, lane = ctid & 31;
    const int wgi = warp / 4;                                       // rows 64 * wgi .. of the tile
    const int row_in_tile = 64 * wgi + 16 * (warp % 4) + lane / 4;  // this thread's first row (the other: + 8)
    float acc[64], blk[64], blk2[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) blk[i] = 0.0f;
    float held[2][16];        // the SwiGLU form: h of the first sub-tile, rows row_in_tile and + 8
    uint32_t tiles_done = 0;  // the plain form: tiles handed to the storers
    // The stage ring's release position (the stage the oldest block in flight holds) and the low
    // words of the stage-0 descriptors of this warpgroup's A rows and of B: a stage or a k32 step further is the
    // same descriptor with its start-address field (bits 0-13: address / 16, below 2^14 for any shared address)
    // advanced, so the loop adds instead of rebuilding each descriptor.
    uint32_t stage = 0;
    const uint32_t a_desc0 = static_cast<uint32_t>(smem_desc(sbase + wgi * 64 * 128));
    const uint32_t b_desc0 = static_cast<uint32_t>(smem_desc(sbase + Fp8Gemm::kABytes));
    constexpr uint32_t kDescHi = static_cast<uint32_t>(smem_desc(0) >> 32);
    constexpr uint32_t kStageDesc = Fp8Gemm::kTileBytes >> 4, kStepDesc = kChunkStep >> 4;
    const auto desc = [](uint32_t lo) { return (uint64_t{kDescHi} << 32) | lo; };
    // The ring's issue position (stage, phase): ahead of the release position by the blocks in flight (one or two).
    uint32_t istage = 0, iphase = 0;
    // Block release: its wgmma are done, the stage goes back to the producer.
    const auto release_block = [&] {
      __syncwarp();
      if (lane == 0) mbar_arrive(empty0 + 8 * stage);
      if (++stage == kStages) stage = 0;
    };
    for (int t = first; t < p.tiles; t += step) {
      const TileAt at = tile_at(p, t);
      const int64_t m0 = at.m0;
      const Fp8Part& part = p.part[at.part];
      const int subs = kSwiglu ? swiglu_subs(p, at) : 1;
      for (int sub = 0; sub < subs; ++sub) {
        const int64_t n0 = at.n0 + sub * Fp8Gemm::kSubN;
        const int64_t sblock = n0 / Fp8Gemm::kBN;  // the weight scale block of the tile's rows
        const float* w_scales = part.w_scales + sblock * part.scale_ld;
        const float* u_scales = kSwiglu ? p.part[1].w_scales + sblock * p.part[1].scale_ld : w_scales;
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
        // Block kb: wait for its stage, read its rows' activation scales, issue its four wgmma into the block tile b
        // and form its scale products (with the weight scales loaded a block ahead, kb + 1's loaded here) while
        // they run.
        float ws_next = __ldg(w_scales), wu_next = kSwiglu ? __ldg(u_scales) : 0.0f;
        const auto issue_block = [&](int kb, float(&b)[64], BlockScales& bs) {
          const float ws = ws_next, wu = wu_next;
          if (kb + 1 < p.kblocks) {
            ws_next = __ldg(w_scales + kb + 1);
            if constexpr (kSwiglu) wu_next = __ldg(u_scales + kb + 1);
          }
          mbar_wait(full0 + 8 * istage, iphase);
          const float* sa = scale_smem + istage * (Fp8Gemm::kScaleBytes / 4);
          const float sa0 = sa[row_in_tile], sa1 = sa[row_in_tile + 8];
          const uint32_t a_lo = a_desc0 + istage * kStageDesc, b_lo = b_desc0 + istage * kStageDesc;
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < Fp8Gemm::kBK / Fp8Gemm::kMmaK; ++kk)
            wgmma_m64n128k32_e4m3(b, desc(a_lo + kk * kStepDesc), desc(b_lo + kk * kStepDesc), kk);
          wgmma_commit();
          bs.s0 = __fmul_rn(sa0, ws);
          bs.s1 = __fmul_rn(sa1, ws);
          bs.u0 = kSwiglu ? __fmul_rn(sa0, wu) : bs.s0;
          bs.u1 = kSwiglu ? __fmul_rn(sa1, wu) : bs.s1;
          if (++istage == kStages) {
            istage = 0;
            iphase ^= 1u;
          }
        };
        // Accumulator i: row row_in_tile + 8 (i % 4 / 2), column 8 (i / 4) + 2 (lane % 4) + i % 2; in the SwiGLU
        // form the column groups i / 4 >= 8 are up's rows (their own scale).
        const auto promote = [&](const float(&b)[64], const BlockScales& bs) {
          release_block();
#pragma unroll
          for (int i = 0; i < 64; ++i)
            acc[i] = fmaf(b[i], (kSwiglu && i >= 32) ? ((i & 2) ? bs.u1 : bs.u0) : ((i & 2) ? bs.s1 : bs.s0), acc[i]);
        };
        BlockScales sc_a, sc_b;  // the products of the blocks in blk and blk2
        if constexpr (kSwiglu) {
          // The SwiGLU form keeps one block tile: beside a second one, its first sub-tile's h would not fit in
          // registers (two block tiles with h read back from its stores measured 2.7 % slower: DECISIONS §2).
          for (int kb = 0; kb < p.kblocks; ++kb) {
            issue_block(kb, blk, sc_a);
            wgmma_wait<0>();
            promote(blk, sc_a);
          }
        } else {
          // Two block tiles: block kb + 1's wgmma are issued into one before block kb's sum in the other is promoted,
          // so the tensor cores have this warpgroup's next block while it promotes. Each element's chain is the
          // same fmaf sequence in the same block order as with one tile.
          issue_block(0, blk, sc_a);
          int kb = 0;
          for (; kb + 2 < p.kblocks; kb += 2) {  // blocks kb + 1 and kb + 2 exist
            issue_block(kb + 1, blk2, sc_b);
            wgmma_wait<1>();  // block kb's wgmma (committed before block kb + 1's)
            promote(blk, sc_a);
            issue_block(kb + 2, blk, sc_a);
            wgmma_wait<1>();
            promote(blk2, sc_b);
          }
          if (kb + 1 < p.kblocks) {
            issue_block(kb + 1, blk2, sc_b);
            wgmma_wait<1>();
            promote(blk, sc_a);
            wgmma_wait<0>();
            promote(blk2, sc_b);
          } else {
            wgmma_wait<0>();
            promote(blk, sc_a);
          }
        }
        if constexpr (kSwiglu) {
          float h[2][16];  // row row_in_tile + 8 hr, column 8 jj + 2 (lane % 4) + e at [hr][2 jj + e]
#pragma unroll
          for (int jj = 0; jj < 8; ++jj)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                h[hr][2 * jj + e] = d_silu(acc[4 * jj + 2 * hr + e]) * acc[4 * (jj + 8) + 2 * hr + e];
          store_rows<8>(part, p.M, m0 + row_in_tile, n0, lane, [&](int hr, int j, int e) { return h[hr][2 * j + e]; });
          if (sub + 1 < subs) {
#pragma unroll
            for (int hr = 0; hr < 2; ++hr)
#pragma unroll
              for (int i = 0; i < 16; ++i) held[hr][i] = h[hr][i];
            continue;
          }
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {  // (each call with fixed arrays: no register array indexed at run time)
            if (subs == 2)
              swiglu_quantise_row(p, m0 + row_in_tile + 8 * hr, at.n0, 2, lane, held[hr], h[hr]);
            else
              swiglu_quantise_row(p, m0 + row_in_tile + 8 * hr, at.n0, 1, lane, h[hr], h[hr]);
          }
        } else {
          // The tile into the staging tile once the storers have read the last one (they had a whole main loop),
          // then every thread's arrival hands it over (release: the storers' acquire sees these writes).
          if (tiles_done > 0) mbar_wait(drained, (tiles_done - 1) & 1u);
#pragma unroll
          for (int hr = 0; hr < 2; ++hr)
#pragma unroll
            for (int j = 0; j < 16; ++j)
              *reinterpret_cast<float2*>(staging + (row_in_tile + 8 * hr) * Fp8Gemm::kStagePitch + 8 * j +
                                         2 * (lane % 4)) = make_float2(acc[4 * j + 2 * hr], acc[4 * j + 2 * hr + 1]);
          mbar_arrive(staged);
          ++tiles_done;
        }
      }
    }
  }
#endif
}

void configure_once() {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_prefill_fp8_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    Fp8Ring<false>::kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_prefill_fp8_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    Fp8Ring<true>::kSmemBytes));
  });
}

bool pairs_ok(const MatmulArgs& a) { return (reinterpret_cast<uintptr_t>(a.y) & 7u) == 0 && a.ldy % 2 == 0; }
bool quads_ok(const MatmulArgs& a) { return (reinterpret_cast<uintptr_t>(a.y) & 15u) == 0 && a.ldy % 4 == 0; }

std::atomic<uint64_t> g_activations_reused{0};  // fp8_activations_reused()

// The x side of a launch: its quantised copy (the producer's, MatmulArgs::xq, where it wrote one for this x; else
// the activation pass now) and the TMA maps of its codes and scales.
void x_side(const MatmulArgs& a0, Fp8Params& p, cudaStream_t stream) {
  const bool noted = a0.xq.codes != nullptr && a0.xq.M == a0.M && a0.xq.K == a0.K;
  const Fp8Activations act = noted ? a0.xq : fp8_quantize_activations(a0.x, a0.ldx, a0.M, a0.K, stream);
  if (noted) g_activations_reused.fetch_add(1);
  p.a =
      e4m3_tensor_map(act.codes, a0.M, a0.K, act.pitch, Fp8Gemm::kBK, Fp8Gemm::kBM, "fp8 prefill matmul (activations)");
  p.sa = f32_tensor_map(act.scales, fp8a::groups_of(a0.K), a0.M, act.scale_pitch, Fp8Gemm::kBM, 1,
                        "fp8 prefill matmul (scales)");
  p.M = a0.M;
  p.kblocks = static_cast<int>(fp8a::groups_of(a0.K));
  p.tiles_m = static_cast<int>(tc::ceil_div(a0.M, int64_t{Fp8Gemm::kBM}));
}

void check_scale_rows(const MatmulArgs& a) {
  SS_CHECK(a.scale_ld >= fp8a::groups_of(a.K), "fp8 prefill matmul: scale rows of {} for K = {} ({} blocks)",
           a.scale_ld, a.K, fp8a::groups_of(a.K));
}

Fp8Part part_of(const MatmulArgs& a, int box_rows) {
  Fp8Part part{};
  part.b = e4m3_tensor_map(a.w, a.N, a.K, a.ldw, Fp8Gemm::kBK, box_rows, "fp8 prefill matmul (weights)");
  part.w_scales = a.w_scales;
  part.scale_ld = a.scale_ld;
  part.y = a.y;
  part.ldy = a.ldy;
  part.N = a.N;
  part.pairs = pairs_ok(a);
  part.quads = quads_ok(a);
  return part;
}

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
  for (int i = 0; i < count; ++i) check_scale_rows(parts[i]);
  configure_once();
  Fp8Params x{};
  x_side(a0, x, stream);
  for (int first = 0; first < count; first += kMaxParts) {
    Fp8Params p = x;
    int64_t tiles = 0;
    const int n_parts = std::min(kMaxParts, count - first);
    for (int i = 0; i < kMaxParts; ++i) {
      Fp8Part& part = p.part[i];
      if (i >= n_parts) {
        part.tiles_end = INT_MAX;  // never reached: every launch tile is below p.tiles
        continue;
      }
      const MatmulArgs& a = parts[first + i];
      part = part_of(a, Fp8Gemm::kBN);
      tiles += int64_t{p.tiles_m} * tc::ceil_div(a.N, int64_t{Fp8Gemm::kBN});
      SS_CHECK(tiles <= INT_MAX, "fp8 prefill matmul: {} x {} is more tiles than the kernel counts", a.M, a.N);
      part.tiles_end = static_cast<int>(tiles);
    }
    p.tiles = static_cast<int>(tiles);
    const int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
    launch_pdl(matmul_prefill_fp8_kernel<false>, dim3(static_cast<unsigned>(grid)), Fp8Gemm::kThreads,
               Fp8Ring<false>::kSmemBytes, stream, p);
    CUDA_CHECK_LAUNCH();
  }
  return true;
}

bool matmul_fp8_prefill_swiglu(const MatmulArgs& gate, const MatmulArgs& up, Fp8Activations* hq, cudaStream_t stream) {
  if (hq == nullptr || !wgmma_available() || !fp8_prefill_fits(gate) || !fp8_prefill_fits(up)) return false;
  if (up.x != gate.x || up.ldx != gate.ldx || up.M != gate.M || up.K != gate.K || up.N != gate.N) return false;
  check_scale_rows(gate);
  check_scale_rows(up);
  configure_once();
  Fp8Params p{};
  x_side(gate, p, stream);
  const int64_t M = gate.M, N = gate.N;
  const int64_t tiles = int64_t{p.tiles_m} * tc::ceil_div(N, int64_t{Fp8Gemm::kBN});
  SS_CHECK(tiles <= INT_MAX, "fp8 prefill matmul: {} x {} is more tiles than the kernel counts", M, N);
  p.tiles = static_cast<int>(tiles);
  p.part[0] = part_of(gate, Fp8Gemm::kSubN);
  p.part[1] = part_of(up, Fp8Gemm::kSubN);
  p.part[0].tiles_end = p.tiles;
  for (int i = 1; i < kMaxParts; ++i) p.part[i].tiles_end = INT_MAX;
  // h's quantised copy, in the activation pass's layout.
  const Fp8Activations out = fp8_activations_scratch(M, N, ScratchSlot::Fp8ActivationOut, stream);
  p.hq_codes = const_cast<uint8_t*>(out.codes);
  p.hq_pitch = out.pitch;
  p.hq_scales = const_cast<float*>(out.scales);
  p.hq_scale_pitch = out.scale_pitch;
  const int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
  launch_pdl(matmul_prefill_fp8_kernel<true>, dim3(static_cast<unsigned>(grid)), Fp8Gemm::kThreads,
             Fp8Ring<true>::kSmemBytes, stream, p);
  CUDA_CHECK_LAUNCH();
  *hq = out;
  return true;
}

uint64_t fp8_activations_reused() { return g_activations_reused.load(); }

}  // namespace specserve::cuda::kernels
