// The prefill GEMM (Ops::matmul_prefill; sm_90a only): y[M, N] = x[M, K] · w[N, K]ᵀ for bf16 weights at
// the Hopper tensor cores' rate, for the rows of prefill chunks.
//
// Numerics — deterministic per row (docs/DESIGN.md §1.2), not the decode kernels' contract: x rounded
// to bf16 once (the same pre-pass and layout as the other tensor-core kernels, matmul_tensor_core_xb.cuh),
// then each output element is ONE f32 accumulator chain over all of K, from +0, one wgmma k16 step per
// 16 k in increasing k; past K (a K that is not a multiple of 64) the TMA box reads zeros, which add
// nothing. No split of K, no reduction across CTAs, and the tile shape (128 x 256) is fixed: an
// element's bits depend on its x row, its w row and K only — never on M, on the rows around it or on
// the tile it falls in. (A wgmma step computes each row of its 64-row output from that row of A alone.)
// So a prefill row gets the same bits in any chunking of its prompt and beside any other rows. They are
// not the decode kernels' bits (those split K by k_split(N, K)); prefill need not equal decode.
//
// Pipeline (one CTA per multiprocessor, persistent): warpgroup 0 is the producer — one thread issues the
// TMA loads of a 128 x 64 tile of x's copy and a 256 x 64 tile of w into one of kStages stages (128-byte
// swizzle, the layout wgmma's descriptors read) and arms the stage's `full` barrier with the bytes to
// expect; warpgroups 1 and 2 are consumers, each computing 64 rows x 256 columns with wgmma.m64n256k16
// (128 f32 accumulators a thread), keeping one stage's wgmma in flight and handing the stage before
// back through its `empty` barrier. A launch serves up to four weights that share x (GemmParams: their
// tiles one after the other); each weight's output tiles are walked with M fastest (m = t % tiles_m), so
// the CTAs running at once share the same weight columns and x stays in L2; the producer loads the next
// tile's stages while the consumers store the last one.
//
// The SwiGLU form (matmul_bf16_prefill_swiglu): out = silu(x · gateᵀ) ⊙ (x · upᵀ) for an MLP's gate and up
// weights in one pass. A tile's 256 B rows are 128 rows of gate and the same 128 rows of up (two TMA boxes
// of 64 x 128 stacked in the stage: the 128-byte swizzle repeats every 8 rows, so two boxes lay out as one
// box of 256), so a thread's accumulators j and j + 16 (columns c and c + 128 of the m64n256 tile) are gate
// and up of the same output column. The epilogue stores silu(g) · u (the swiglu kernel's formula,
// device_math.cuh) in f32 and its bf16 copy for the down projection (kernels.h: XbOut). Each accumulator is
// the chain the plain GEMM computes for that element, so out has the bits of matmul_multi_prefill then
// swiglu, and the gate and up outputs (2 x 4 bytes an element) are never written or read back.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <climits>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "backend/cuda/matmul_wgmma.cuh"
#include "backend/cuda/matmul_wgmma_ptx.cuh"
#include "backend/cuda/tma_map.h"
#include "core/error.h"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;
using namespace specserve::cuda::wg;

struct Gemm {
  static constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = kBM * kBK * 2, kBBytes = kBN * kBK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kSmemBytes = kStageBytes * kStages + 1024;  // + the swizzle's 1024-byte alignment
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
};
static_assert(Gemm::kBK == kKT && kKT * 2 == 128, "a 64-element row of a tile is the 128-byte swizzle's width");
static_assert(128 * Gemm::kProducerRegs + 256 * Gemm::kConsumerRegs <= 65536, "the register file");
static_assert(Gemm::kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 block may have");

// One weight of a launch: its output tiles are the launch's tiles [previous part's tiles_end, tiles_end).
struct GemmPart {
  CUtensorMap b;  // w [N, K] (stride ldw), box 64 x 256
  float* y;
  int64_t ldy;
  int64_t N;
  int tiles_end;
  bool pairs;  // y and ldy allow 8-byte stores of column pairs
};
// Up to kMaxParts weights that share x (q, k and v; a DeltaNet's in_proj and its a / b projections; gate and
// up) in one launch: the small weights' tiles fill the last wave of the large one's instead of taking a
// launch of a few CTAs each after it (8B k / v at 2,048 rows: 64 CTAs for 48 µs; 27B a / b: 16 CTAs for
// 56 µs — session 18's trace). Which launch or CTA computes a tile changes none of its bits.
constexpr int kMaxParts = 4;
struct GemmParams {
  CUtensorMap a;  // x's bf16 copy [M, K] (pitch xb_pitch), box 64 x 128
  GemmPart part[kMaxParts];
  int64_t M;
  int kblocks, tiles_m, tiles;
  // The SwiGLU form: part[0].b is gate and part[1].b up (boxes 64 x 128), part[0] the output [M, N] (N the
  // intermediate width, tiles of 128 columns), xb its bf16 copy.
  bool swiglu;
  XbOut xb;
};
constexpr int kSwigluBN = Gemm::kBN / 2;  // output columns of a SwiGLU tile

// The part of launch tile t and the tile's place in that part's [tiles_m, N / kBN] grid (M fastest).
struct TileAt {
  int part;
  int64_t m0, n0;
};
__device__ __forceinline__ TileAt tile_at(const GemmParams& p, int t) {
  int i = 0;
  while (t >= p.part[i].tiles_end) ++i;
  const int local = t - (i > 0 ? p.part[i - 1].tiles_end : 0);
  return {i, int64_t{local % p.tiles_m} * Gemm::kBM, int64_t{local / p.tiles_m} * (p.swiglu ? kSwigluBN : Gemm::kBN)};
}

// The SwiGLU epilogue of one thread: rows r0 and r0 + 8 of the tile (columns n0 ..), accumulators j < 16
// gate and j + 16 up of columns n0 + 8 j + 2 (lane % 4) + {0, 1}. Stores out and its bf16 copy; rows from M
// up to xb.rows (padding) get zero registers, and the tile at the last columns also zeroes the registers
// past N up to the pitch (xb_out.cuh's layout).
__device__ __forceinline__ void swiglu_epilogue(const GemmParams& p, const float (&acc)[128], int64_t r0, int64_t n0,
                                                int lane) {
  const GemmPart& part = p.part[0];
  const int64_t regs_per_row = p.xb.pitch / 2;
  const bool last_cols = n0 + kSwigluBN >= part.N;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = r0 + 8 * h;
    if (r >= p.xb.rows) continue;
    uint32_t* xr = p.xb.regs + r * regs_per_row;
    if (r >= p.M) {  // a padding row of the copy
      for (int64_t c = n0 + 2 * (lane % 4); c < (last_cols ? p.xb.pitch : n0 + kSwigluBN); c += 8) xr[c / 2] = 0u;
      continue;
    }
    float* yr = part.y + r * part.ldy;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int64_t c = n0 + 8 * j + 2 * (lane % 4);
      if (c >= part.N) continue;
      const float v0 = d_silu(acc[4 * j + 2 * h]) * acc[4 * (j + 16) + 2 * h];
      const bool two = c + 1 < part.N;
      const float v1 = two ? d_silu(acc[4 * j + 2 * h + 1]) * acc[4 * (j + 16) + 2 * h + 1] : 0.0f;
      if (part.pairs && two) {
        *reinterpret_cast<float2*>(yr + c) = make_float2(v0, v1);
      } else {
        yr[c] = v0;
        if (two) yr[c + 1] = v1;
      }
      xr[c / 2] = pack_bf16x2(v0, v1);
    }
    if (last_cols) {
      const int64_t tail = (part.N + 1) / 2 * 2;  // the first register wholly past N
      for (int64_t c = tail + 2 * (lane % 4); c < p.xb.pitch; c += 8) xr[c / 2] = 0u;
    }
  }
}

__global__ void __launch_bounds__(Gemm::kThreads, 1) matmul_prefill_kernel(const __grid_constant__ GemmParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_begin();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * Gemm::kStages];  // full[0..S), then empty[0..S)
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  const uint32_t sbase = smem_addr(smem_raw) + pad;
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[Gemm::kStages]);
  const int tid = static_cast<int>(threadIdx.x);
  // full: the producer thread; empty: one arrival a consumer warp
  init_ring_barriers(tid, full0, empty0, Gemm::kStages, 1, Gemm::kConsumers * 4);
  __syncthreads();

  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (warpgroup == 0) {
    // ---- producer: one thread issues every load ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Gemm::kProducerRegs));
    if (tid != 0) return;
    uint32_t it = 0;
    for (int t = static_cast<int>(blockIdx.x); t < p.tiles; t += static_cast<int>(gridDim.x)) {
      const TileAt at = tile_at(p, t);
      const int m0 = static_cast<int>(at.m0), n0 = static_cast<int>(at.n0);
      const CUtensorMap* b_map = &p.part[at.part].b;
      for (int kb = 0; kb < p.kblocks; ++kb, ++it) {
        const uint32_t stage = it % Gemm::kStages;
        if (it >= Gemm::kStages) mbar_wait(empty0 + 8 * stage, (it / Gemm::kStages - 1) & 1u);
        const uint32_t dst = sbase + stage * Gemm::kStageBytes, bar = full0 + 8 * stage;
        mbar_arrive_expect_tx(bar, Gemm::kStageBytes);
        tma_load_2d(dst, &p.a, kb * Gemm::kBK, m0, bar);
        if (p.swiglu) {  // gate rows n0 .. n0 + 127, then up's
          tma_load_2d(dst + Gemm::kABytes, &p.part[0].b, kb * Gemm::kBK, n0, bar);
          tma_load_2d(dst + Gemm::kABytes + Gemm::kBBytes / 2, &p.part[1].b, kb * Gemm::kBK, n0, bar);
        } else {
          tma_load_2d(dst + Gemm::kABytes, b_map, kb * Gemm::kBK, n0, bar);
        }
      }
    }
    return;
  }

  // ---- consumers ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Gemm::kConsumerRegs));
  const int ctid = tid - 128, warp = ctid >> 5, lane = ctid & 31;
  const int wgi = warp / 4;  // rows 64 * wgi .. of the tile
  float acc[128];
  uint32_t it = 0;
  for (int t = static_cast<int>(blockIdx.x); t < p.tiles; t += static_cast<int>(gridDim.x)) {
    const TileAt at = tile_at(p, t);
    const int64_t m0 = at.m0, n0 = at.n0;
    const GemmPart& part = p.part[at.part];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    for (int kb = 0; kb < p.kblocks; ++kb, ++it) {
      const uint32_t stage = it % Gemm::kStages;
      mbar_wait(full0 + 8 * stage, (it / Gemm::kStages) & 1u);
      const uint32_t a = sbase + stage * Gemm::kStageBytes + wgi * 64 * 128;
      const uint32_t b = sbase + stage * Gemm::kStageBytes + Gemm::kABytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Gemm::kBK / kMmaK; ++kk)
        wgmma_m64n256k16(acc, smem_desc(a + kk * kChunkStep), smem_desc(b + kk * kChunkStep));
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's wgmma are done: it goes back to the producer
      __syncwarp();
      if (kb > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % Gemm::kStages));
    }
    wgmma_wait<0>();
    __syncwarp();
    if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % Gemm::kStages));
    // Accumulator i of this thread: row 16 (warp % 4) + lane / 4 + 8 (i % 4 / 2) of the warpgroup's 64,
    // column 8 (i / 4) + 2 (lane % 4) + i % 2 (the m16n8 C fragment, repeated along n).
    const int64_t r0 = m0 + 64 * wgi + 16 * (warp % 4) + lane / 4;
    if (p.swiglu) {
      swiglu_epilogue(p, acc, r0, n0, lane);
      continue;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 8 * h;
      if (r >= p.M) continue;
      float* yr = part.y + r * part.ldy;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int64_t c = n0 + 8 * j + 2 * (lane % 4);
        const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
        store_column_pair(yr, c, part.N, part.pairs, v0, v1);
      }
    }
  }
#endif
}

// A row-major bf16 [rows, cols] matrix (row stride `ld` elements) in boxes of 64 columns x box_rows rows
// (tma_map.h).
CUtensorMap tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_rows) {
  return bf16_tensor_map(base, rows, cols, ld, Gemm::kBK, box_rows, "prefill matmul");
}

}  // namespace

bool prefill_matmul_fits(const MatmulArgs& a) {
  const bool aligned = (reinterpret_cast<uintptr_t>(a.w) & 15u) == 0 && a.ldw % 8 == 0;
  return a.w_bf16 && aligned && a.K % 8 == 0 && a.K > 0 && a.M > 0 && a.N > 0 && a.M <= INT_MAX && a.N <= INT_MAX &&
         a.K <= INT_MAX;
}

namespace {

void configure_once() {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Gemm::kSmemBytes));
  });
}

// The tensor map of x's bf16 copy: the one its producer wrote (norms, swiglu, prefill attention: XbOut),
// else converted here.
CUtensorMap x_map(const MatmulArgs& a0, cudaStream_t stream) {
  const bool reuse = a0.xb != nullptr && a0.ldxb >= a0.K && a0.ldxb % 8 == 0;
  const int64_t ldxb = reuse ? a0.ldxb : xb_pitch(a0.K, kKT);
  const uint16_t* xb = reuse ? a0.xb : matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, ldxb, stream);
  if (reuse) matmul_count_xb_reused();
  return tensor_map(xb, a0.M, a0.K, ldxb, Gemm::kBM);
}

bool pairs_ok(const MatmulArgs& a) { return (reinterpret_cast<uintptr_t>(a.y) & 7u) == 0 && a.ldy % 2 == 0; }

}  // namespace

bool matmul_bf16_prefill(const MatmulArgs* parts, int count, cudaStream_t stream) {
  if (count < 1 || !wgmma_available()) return false;
  const MatmulArgs& a0 = parts[0];
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    if (!prefill_matmul_fits(a) || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K) return false;
  }
  configure_once();
  const CUtensorMap a_map = x_map(a0, stream);
  const int tiles_m = static_cast<int>(ceil_div(a0.M, int64_t{Gemm::kBM}));
  for (int first = 0; first < count; first += kMaxParts) {
    GemmParams p{};
    p.a = a_map;
    p.M = a0.M;
    p.kblocks = static_cast<int>(ceil_div(a0.K, int64_t{Gemm::kBK}));
    p.tiles_m = tiles_m;
    int64_t tiles = 0;
    const int n_parts = std::min(kMaxParts, count - first);
    for (int i = 0; i < kMaxParts; ++i) {
      GemmPart& part = p.part[i];
      if (i >= n_parts) {
        part.tiles_end = INT_MAX;  // never reached: every launch tile is below p.tiles
        continue;
      }
      const MatmulArgs& a = parts[first + i];
      part.b = tensor_map(a.w, a.N, a.K, a.ldw, Gemm::kBN);
      part.y = a.y;
      part.ldy = a.ldy;
      part.N = a.N;
      part.pairs = pairs_ok(a);
      tiles += int64_t{tiles_m} * ceil_div(a.N, int64_t{Gemm::kBN});
      SS_CHECK(tiles <= INT_MAX, "prefill matmul: {} x {} is more tiles than the kernel counts", a.M, a.N);
      part.tiles_end = static_cast<int>(tiles);
    }
    p.tiles = static_cast<int>(tiles);
    const int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
    launch_pdl(matmul_prefill_kernel, dim3(static_cast<unsigned>(grid)), Gemm::kThreads, Gemm::kSmemBytes, stream, p);
    CUDA_CHECK_LAUNCH();
  }
  return true;
}

bool matmul_bf16_prefill_swiglu(const MatmulArgs& gate, const MatmulArgs& up, const XbOut& xb, cudaStream_t stream) {
  if (!wgmma_available() || xb.regs == nullptr || !prefill_matmul_fits(gate) || !prefill_matmul_fits(up)) return false;
  if (up.x != gate.x || up.ldx != gate.ldx || up.M != gate.M || up.K != gate.K || up.N != gate.N) return false;
  if (xb.rows < gate.M || xb.pitch < gate.N || xb.pitch % 2 != 0) return false;
  configure_once();
  GemmParams p{};
  p.a = x_map(gate, stream);
  p.M = gate.M;
  p.kblocks = static_cast<int>(ceil_div(gate.K, int64_t{Gemm::kBK}));
  p.tiles_m = static_cast<int>(ceil_div(gate.M, int64_t{Gemm::kBM}));
  const int64_t tiles = int64_t{p.tiles_m} * ceil_div(gate.N, int64_t{kSwigluBN});
  SS_CHECK(tiles <= INT_MAX, "prefill matmul: {} x {} is more tiles than the kernel counts", gate.M, gate.N);
  p.tiles = static_cast<int>(tiles);
  p.swiglu = true;
  p.xb = xb;
  p.part[0].b = tensor_map(gate.w, gate.N, gate.K, gate.ldw, kSwigluBN);
  p.part[1].b = tensor_map(up.w, up.N, up.K, up.ldw, kSwigluBN);
  p.part[0].y = gate.y;
  p.part[0].ldy = gate.ldy;
  p.part[0].N = gate.N;
  p.part[0].pairs = pairs_ok(gate);
  p.part[0].tiles_end = p.tiles;
  for (int i = 1; i < kMaxParts; ++i) p.part[i].tiles_end = INT_MAX;
  const int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
  launch_pdl(matmul_prefill_kernel, dim3(static_cast<unsigned>(grid)), Gemm::kThreads, Gemm::kSmemBytes, stream, p);
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace specserve::cuda::kernels
