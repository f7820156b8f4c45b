// The TMA-fed slice-serial warpgroup matmul (matmul_wgmma_tma.cuh: shapes, the shape rule, why; sm_90a only):
// y_i[M, N_i] = x[M, K] · w_i[N_i, K]ᵀ for bf16 weights, row-invariant, at verify sizes (33-256 rows: the
// plan's rule, backend/matmul_choice.h).
//
// Numerics: those of every tensor-core kernel (the contract heading matmul_tensor_core.cu), exactly the
// slice-serial kernel's (matmul_wgmma_serial_sm90a.cu): x's bf16 copy; K cut by k_split(N, K) into S slices
// of cps chunks; each slice's K tiles (wg::serial_tile: 64 k from the slice's first chunk, the last one
// possibly short) go through one wgmma k16 step per chunk of the slice, in increasing k, into a fresh
// accumulator from +0 — never a chunk past the slice's end, even where a tile's box reaches into the next
// slice or past K (TMA reads zeros there, which only the skipped steps would see); the slice's partial is
// added to the running total in registers when the slice ends, ((p0 + p1) + p2) + ..., by the thread that
// owns the element. So each row has the bits of the gemv kernel's at M = 1.
//
// Pipeline (one CTA per multiprocessor, persistent; units = output tiles over all their slices, M tiles
// fastest): warpgroup 0's thread 0 issues, per K tile, a TMA box of BM rows x 64 k of x's copy and one of
// BN rows x 64 k of w (128-byte swizzle: the layout smem_desc describes) into stage it % kStages after the
// consumers handed it back (`empty`, one arrival per consumer warp), arming `full` with the bytes to
// expect. Consumers wait on `full`, issue the tile's wgmma, keep one tile's wgmma in flight (wait_group 1)
// and hand back the stage before; at a slice's end they drain (wait_group 0), add, and hand back both. The
// ring runs on across units, so the next unit's loads overlap a unit's last slice and its stores.
//
// PDL (launch.cuh): every thread executes pdl_begin() before it touches x's copy or y (other kernels'
// memory); the producer thread first issues the weight boxes of its first unit's first kStages K tiles, so
// their DRAM latency overlaps the previous kernel's tail (weights are parameters: launch.cuh's exception),
// except where the weight is the fp8 path's dequantised scratch, which the kernel before wrote.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "backend/cuda/matmul_wgmma.cuh"
#include "backend/cuda/matmul_wgmma_ptx.cuh"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/matmul_wgmma_tma.cuh"
#include "backend/cuda/matmul_wgmma_tma.h"
#include "backend/cuda/matmul_wgmma_tma_ptx.cuh"
#include "backend/cuda/step_graphs.h"
#include "core/error.h"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;
using namespace specserve::cuda::wg;
using namespace specserve::cuda::wgt;

constexpr int kMaxParts = 4;

// One weight of a launch: its units are the launch's units [previous part's units_end, units_end).
struct WgtPart {
  CUtensorMap b;  // w [N, K] (stride ldw), box 64 x BN
  float* y;
  int64_t ldy;
  int64_t N;
  int64_t cps;  // chunks per slice (k_split(N, K))
  int ktiles;   // K tiles of all slices: wg::serial_tiles(chunks, cps)
  int per;      // K tiles of a slice but the last: ceil(cps / 4)
  int slices;   // units of a tile: S (WgtSplit::Slices) or 1
  int tiles;    // output tiles: tiles_m x column tiles
  int tile0;    // the launch's index of its first tile (scratch and flags)
  int units_end;
  bool pairs;  // y and ldy allow 8-byte stores of column pairs
};
struct WgtParams {
  CUtensorMap a;  // x's bf16 copy [M, K], box 64 x BM
  WgtPart part[kMaxParts];
  int64_t M, chunks;
  int tiles_m, units;
  float* fold;      // WgtSplit::Slices: a running total T per tile (BM x BN f32, in consumer thread order)
  uint32_t* flags;  // per tile: s when T_{s-1} is published for slice s's unit; 0 between launches
  bool early_w;     // the weights are model parameters: their first boxes may be loaded before the PDL wait
};

// A unit: part, tile origin, its slice s of `slices` (0 of 1 for a whole tile), the launch's tile index,
// and its K tiles [kt0, kt1) in wg::serial_tile's numbering.
struct UnitAt {
  int part;
  int64_t m0, n0;
  int s, slices, tile, kt0, kt1;
};
template <class T>
__device__ __forceinline__ UnitAt unit_at(const WgtParams& p, int u) {
  int i = 0;
  while (u >= p.part[i].units_end) ++i;
  const WgtPart& part = p.part[i];
  const int local = u - (i > 0 ? p.part[i - 1].units_end : 0);
  const WgtUnit w = wgt_unit(local, part.tiles, p.tiles_m, part.slices, part.per, part.ktiles);
  return {i,    int64_t{w.m_tile} * T::kBM, int64_t{w.n_tile} * T::kBN, w.s, part.slices, part.tile0 + w.tile, w.kt0,
          w.kt1};
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int N>
__device__ __forceinline__ void wgmma_chunk(float (&acc)[N / 2], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (N == 128)
    wgmma_m64n128k16(acc, desc_a, desc_b);
  else
    wgmma_m64n64k16(acc, desc_a, desc_b);
}

// One K tile of a slice into acc: one wgmma k16 step per chunk, never a chunk past the slice's end.
template <class T>
__device__ __forceinline__ void issue_tile(float (&acc)[T::kAcc], uint32_t a, uint32_t b, const SerialTile& st) {
  constexpr int kChunks = kKT / kMmaK;
  auto mma = [&](int kk) { wgmma_chunk<T::kWgN>(acc, smem_desc(a + kk * kChunkStep), smem_desc(b + kk * kChunkStep)); };
  if (st.chunk0 + kChunks <= st.chunk_end) {  // straight-line issue
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) mma(kk);
  } else {  // the slice's last tile, short
#pragma unroll
    for (int kk = 0; kk < kChunks - 1; ++kk)
      if (st.chunk0 + kk < st.chunk_end) mma(kk);
  }
}
#endif

// A complete slice's partial into the running total (the first slice's is the total: no + 0, which would
// turn a -0 into +0), and its accumulators back to +0 for the next slice they serve.
template <class T>
__device__ __forceinline__ void fold(float (&total)[T::kAcc], float (&acc)[T::kAcc], bool first) {
  if (first) {
#pragma unroll
    for (int i = 0; i < T::kAcc; ++i) total[i] = acc[i];
  } else {
#pragma unroll
    for (int i = 0; i < T::kAcc; ++i) total[i] = total[i] + acc[i];
  }
#pragma unroll
  for (int i = 0; i < T::kAcc; ++i) acc[i] = 0.0f;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A slice unit's hand-over (matmul_wgmma_tma.cuh: the slice units): T_s = T_{s-1} + p_s from the tile's
// scratch (s > 0; consumer thread 0 waits for the flag, acquire, then the consumers' barrier), and T_s
// published (not the last slice: the data, the barrier, a release store of s + 1) or the flag put back to
// 0 (the last: nothing reads it again this launch; the next launch runs after this one, launch.cuh's PDL
// rule). T's element i of consumer thread c sits at float4 (i / 4) x 256 + c of the tile: coalesced, and
// read by the same thread position that wrote it. L2 only (ld/st.cg): L1 is not coherent across CTAs.
template <class T>
__device__ __forceinline__ void hand_over(const WgtParams& p, const UnitAt& at, float (&total)[T::kAcc], int ctid) {
  constexpr int kConsumerThreads = 128 * T::kConsumers;
  static_assert(T::kAcc % 4 == 0 && T::kAcc * kConsumerThreads == T::kBM * T::kBN, "T's layout");
  float4* tile = reinterpret_cast<float4*>(p.fold + int64_t{at.tile} * (T::kBM * T::kBN)) + ctid;
  uint32_t* flag = p.flags + at.tile;
  if (at.s > 0) {
    if (ctid == 0) {
      // Each poll is an L2 round trip (> 0.5 us), so 2^26 of them are over half a minute: a lost hand-over
      // then gives up with a NaN in the tile's first element (a bit-equal test fails instead of hanging;
      // __trap here made ptxas spill the 128 x 128 consumers' registers).
      for (uint32_t polls = 0; ld_acquire_gpu(flag) != static_cast<uint32_t>(at.s);) {
        __nanosleep(32);
        if (++polls == (1u << 26)) {
          total[0] = __int_as_float(0x7fc0dead);
          break;
        }
      }
    }
    __syncwarp();
    consumers_sync(kConsumerThreads);
#pragma unroll
    for (int j = 0; j < T::kAcc / 4; ++j) {
      const float4 t = __ldcg(tile + j * kConsumerThreads);
      total[4 * j] = t.x + total[4 * j];
      total[4 * j + 1] = t.y + total[4 * j + 1];
      total[4 * j + 2] = t.z + total[4 * j + 2];
      total[4 * j + 3] = t.w + total[4 * j + 3];
    }
  }
  if (at.s + 1 < at.slices) {
#pragma unroll
    for (int j = 0; j < T::kAcc / 4; ++j)
      __stcg(tile + j * kConsumerThreads,
             make_float4(total[4 * j], total[4 * j + 1], total[4 * j + 2], total[4 * j + 3]));
    // Every consumer's T stores before the release (the barrier orders them before thread 0's release
    // store, which is cumulative: the pattern of CUTLASS's semaphores).
    consumers_sync(kConsumerThreads);
    if (ctid == 0) st_release_gpu(flag, static_cast<uint32_t>(at.s + 1));
  } else if (ctid == 0) {
    *reinterpret_cast<volatile uint32_t*>(flag) = 0u;  // after its own wait: no other thread reads it
  }
}

#endif

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) matmul_wgmma_tma_kernel(const __grid_constant__ WgtParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * T::kStages];  // full[0..S), then empty[0..S)
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  const uint32_t sbase = smem_addr(smem_raw) + pad;
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[T::kStages]);
  const int tid = static_cast<int>(threadIdx.x);
  // full: the producer thread; empty: one arrival a consumer warp
  init_ring_barriers(tid, full0, empty0, T::kStages, 1, T::kConsumers * 4);
  __syncthreads();
  // Every thread but the producer's waits for the previous kernel here; the producer first issues the
  // weight boxes of its first unit's first stages (weights are parameters: launch.cuh's exception).
  if (tid != 0) pdl_begin();

  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (warpgroup == 0) {
    // ---- producer: one thread issues every load ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::kProducerRegs));
    if (tid != 0) return;
    // The first unit's first stages (empty: no wait) get their weight box now, x's after the wait.
    uint32_t early = 0;
    if (p.early_w && static_cast<int>(blockIdx.x) < p.units) {
      const UnitAt at = unit_at<T>(p, static_cast<int>(blockIdx.x));
      const WgtPart& part = p.part[at.part];
      const int n = at.kt1 - at.kt0;
      early = static_cast<uint32_t>(n < T::kStages ? n : T::kStages);
      SerialWalk walk(at.kt0, p.chunks, part.cps);
      for (uint32_t g = 0; g < early; ++g, walk.next()) {
        const SerialTile st = walk.tile();
        const uint32_t bar = full0 + 8 * g;
        mbar_arrive_expect_tx(bar, T::kStageBytes);
        tma_load_2d(sbase + g * T::kStageBytes + T::kABytes, &part.b, static_cast<int>(st.chunk0 * kMmaK),
                    static_cast<int>(at.n0), bar);
      }
    }
    pdl_begin();
    uint32_t it = 0;
    for (int u = static_cast<int>(blockIdx.x); u < p.units; u += static_cast<int>(gridDim.x)) {
      const UnitAt at = unit_at<T>(p, u);
      const WgtPart& part = p.part[at.part];
      const int m0 = static_cast<int>(at.m0), n0 = static_cast<int>(at.n0);
      SerialWalk walk(at.kt0, p.chunks, part.cps);
      for (int g = at.kt0; g < at.kt1; ++g, ++it, walk.next()) {
        const uint32_t stage = it % T::kStages;
        if (it >= T::kStages) mbar_wait(empty0 + 8 * stage, (it / T::kStages - 1) & 1u);
        const SerialTile st = walk.tile();
        const int k0 = static_cast<int>(st.chunk0 * kMmaK);
        const uint32_t dst = sbase + stage * T::kStageBytes, bar = full0 + 8 * stage;
        if (it >= early) {  // (an early stage's barrier is armed and its weights are on their way)
          mbar_arrive_expect_tx(bar, T::kStageBytes);
          tma_load_2d(dst + T::kABytes, &part.b, k0, n0, bar);
        }
        tma_load_2d(dst, &p.a, k0, m0, bar);
      }
    }
    return;
  }

  // ---- consumers ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::kConsumerRegs));
  const int ctid = tid - 128, warp = ctid >> 5, lane = ctid & 31;
  const int wgi = warp / 4;  // consumer warpgroup 0 or 1
  // Its part of a stage: rows 64 wgi of the A tile (BM = 128), or columns kWgN wgi of the B tile (BM = 64).
  const uint32_t a_off = T::kSplitM ? static_cast<uint32_t>(wgi * 64 * 128) : 0u;
  const uint32_t b_off = T::kABytes + (T::kSplitM ? 0u : static_cast<uint32_t>(wgi * T::kWgN * 128));
  float acc[T::kAcc], total[T::kAcc];
  uint32_t it = 0;
  for (int u = static_cast<int>(blockIdx.x); u < p.units; u += static_cast<int>(gridDim.x)) {
    int kt0, kt1, slice0;
    int64_t cps;
    {
      const UnitAt at = unit_at<T>(p, u);
      kt0 = at.kt0, kt1 = at.kt1, slice0 = at.s, cps = p.part[at.part].cps;
    }
#pragma unroll
    for (int i = 0; i < T::kAcc; ++i) acc[i] = 0.0f, total[i] = 0.0f;
    int pending = -1;  // a stage whose wgmma may still run, to be handed back
    SerialWalk walk(kt0, p.chunks, cps);
    for (int g = kt0; g < kt1; ++g, ++it, walk.next()) {
      const uint32_t stage = it % T::kStages;
      mbar_wait(full0 + 8 * stage, (it / T::kStages) & 1u);
      const SerialTile st = walk.tile();
      const uint32_t a = sbase + stage * T::kStageBytes + a_off;
      const uint32_t b = sbase + stage * T::kStageBytes + b_off;
      wgmma_fence();
      issue_tile<T>(acc, a, b, st);
      wgmma_commit();
      if (st.last_of_slice) {
        // The slice's chain is complete: add it to the total, in slice order. (Draining here costs the
        // tensor cores a wgmma latency per slice; chaining odd slices into a second accumulator set would
        // hide it, but zeroing a set while the other's wgmma run makes ptxas serialise every wgmma, C7515.)
        wgmma_wait<0>();
        fold<T>(total, acc, st.slice == slice0);  // the unit's first slice: its partial is the total
        __syncwarp();
        if (pending >= 0 && lane == 0) mbar_arrive(empty0 + 8 * static_cast<uint32_t>(pending));
        if (lane == 0) mbar_arrive(empty0 + 8 * stage);
        pending = -1;
      } else {
        wgmma_wait<1>();  // the previous tile's wgmma are done: its stage goes back
        __syncwarp();
        if (pending >= 0 && lane == 0) mbar_arrive(empty0 + 8 * static_cast<uint32_t>(pending));
        pending = static_cast<int>(stage);
      }
    }
    // The unit's place again (recomputed, not kept live through the K loop: registers).
    int u_again = u;
    asm volatile("" : "+r"(u_again));
    const UnitAt at = unit_at<T>(p, u_again);
    const WgtPart& part = p.part[at.part];
    if (at.slices > 1) {
      hand_over<T>(p, at, total, ctid);
      if (at.s + 1 < at.slices) continue;  // y is the last slice's
    }
    // Accumulator i of this thread: row 16 (warp % 4) + lane / 4 + 8 (i % 4 / 2) of the warpgroup's 64,
    // column 8 (i / 4) + 2 (lane % 4) + i % 2 of its kWgN (the m16n8 C fragment, repeated along n).
    const int64_t r0 = at.m0 + (T::kSplitM ? 64 * wgi : 0) + 16 * (warp % 4) + lane / 4;
    const int64_t c0 = at.n0 + (T::kSplitM ? 0 : wgi * T::kWgN) + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 8 * h;
      if (r >= p.M) continue;
      float* yr = part.y + r * part.ldy;
#pragma unroll
      for (int j = 0; j < T::kWgN / 8; ++j) {
        const int64_t c = c0 + 8 * j;
        const float v0 = total[4 * j + 2 * h], v1 = total[4 * j + 2 * h + 1];
        store_column_pair(yr, c, part.N, part.pairs, v0, v1);
      }
    }
  }
#endif
}

// A row-major bf16 [rows, cols] matrix (row stride `ld` elements) in boxes of 64 columns x box_rows rows
// (tma_map.h).
CUtensorMap tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_rows) {
  return bf16_tensor_map(base, rows, cols, ld, kKT, box_rows, "wgmma-tma matmul");
}

std::atomic<uint64_t> g_launches{0};

template <class T>
void launch(const WgtParams& p, cudaStream_t stream) {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_wgmma_tma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  });
  const int grid = std::min(p.units, sm_count());
  launch_pdl(matmul_wgmma_tma_kernel<T>, dim3(static_cast<unsigned>(grid)), T::kThreads, T::kSmemBytes, stream, p);
  CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

struct ShapeDims {
  int bm, bn;
};
constexpr ShapeDims dims_of(WgtShape s) {
  switch (s) {
    case WgtShape::M128N128: return {WgtM128N128::kBM, WgtM128N128::kBN};
    case WgtShape::M128N64: return {WgtM128N64::kBM, WgtM128N64::kBN};
    case WgtShape::M64N128: return {WgtM64N128::kBM, WgtM64N128::kBN};
  }
  return {0, 0};
}

void launch_shape(WgtShape s, const WgtParams& p, cudaStream_t stream) {
  switch (s) {
    case WgtShape::M128N128: return launch<WgtM128N128>(p, stream);
    case WgtShape::M128N64: return launch<WgtM128N64>(p, stream);
    case WgtShape::M64N128: return launch<WgtM64N128>(p, stream);
  }
  fail("wgmma-tma matmul: shape {} is none of the kernel's", static_cast<int>(s));
}

// The slice units' scratch: running totals (`floats`) and per-tile flags (`flags`, zero when allocated and
// left zero by every launch). Kept for the process and grown as the matmul scratch is (matmul_scratch:
// the recorded launches are enqueued and waited for before a block is freed).
struct FoldScratch {
  float* fold;
  uint32_t* flags;
};
FoldScratch fold_scratch(size_t floats, size_t flags, cudaStream_t stream) {
  static std::mutex mutex;
  static float* folds[kMaxDevices] = {};  // the current device's (device_scope.h)
  static uint32_t* flag_blocks[kMaxDevices] = {};
  static size_t fold_caps[kMaxDevices] = {}, flag_caps[kMaxDevices] = {};
  const int device = current_device();
  float*& fold = folds[device];
  uint32_t*& flag_block = flag_blocks[device];
  size_t &fold_cap = fold_caps[device], &flag_cap = flag_caps[device];
  std::lock_guard lock(mutex);
  auto grown = [](size_t bytes) {
    const size_t g = bytes + bytes / 4;
    return (g + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
  };
  if (floats * 4 > fold_cap || flags * 4 > flag_cap) {
    flush_launches();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (floats * 4 > fold_cap) {
      if (fold) CUDA_CHECK(cudaFree(fold));
      fold = nullptr;
      fold_cap = 0;
      const size_t bytes = grown(floats * 4);
      CUDA_CHECK(cudaMalloc(&fold, bytes));
      fold_cap = bytes;
    }
    if (flags * 4 > flag_cap) {
      if (flag_block) CUDA_CHECK(cudaFree(flag_block));
      flag_block = nullptr;
      flag_cap = 0;
      const size_t bytes = grown(flags * 4);
      CUDA_CHECK(cudaMalloc(&flag_block, bytes));
      CUDA_CHECK(cudaMemsetAsync(flag_block, 0, bytes, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      flag_cap = bytes;
    }
  }
  return {fold, flag_block};
}

bool pairs_ok(const MatmulArgs& a) { return (reinterpret_cast<uintptr_t>(a.y) & 7u) == 0 && a.ldy % 2 == 0; }

}  // namespace

bool wgmma_tma_fits(const MatmulArgs& a) {
  const bool aligned = (reinterpret_cast<uintptr_t>(a.w) & 15u) == 0 && a.ldw % 8 == 0;
  return a.w_bf16 && a.w_scales == nullptr && aligned && a.K % 8 == 0 && a.K > 0 && a.M > 0 && a.N > 0 &&
         a.M <= INT_MAX && a.N <= INT_MAX && a.K <= INT_MAX;
}

uint64_t matmul_wgmma_tma_launches() { return g_launches.load(std::memory_order_relaxed); }

bool matmul_bf16_wgmma_tma(const MatmulArgs* parts, int count, cudaStream_t stream, int shape, int split) {
  SS_CHECK(shape < kWgtShapes, "wgmma-tma matmul: shape {} is none of the kernel's (0-{}; < 0: the rule)", shape,
           kWgtShapes - 1);
  SS_CHECK(split < kWgtSplits, "wgmma-tma matmul: split {} is none of the kernel's (0-{}; < 0: the rule)", split,
           kWgtSplits - 1);
  if (count < 1 || !wgmma_available()) return false;
  const MatmulArgs& a0 = parts[0];
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    if (!wgmma_tma_fits(a) || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K) return false;
  }
  // x's bf16 copy: the one its producer wrote (XbOut), else converted here. TMA reads [M, K] of it (zeros
  // outside), so any pitch >= K that is a multiple of 8 elements serves.
  const bool reuse =
      a0.xb != nullptr && a0.ldxb >= a0.K && a0.ldxb % 8 == 0 && (reinterpret_cast<uintptr_t>(a0.xb) & 15u) == 0;
  const int64_t ldxb = reuse ? a0.ldxb : xb_pitch(a0.K, kKT);
  const uint16_t* xb = reuse ? a0.xb : matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, ldxb, stream);
  if (reuse) matmul_count_xb_reused();
  const int64_t chunks = ceil_div(a0.K, int64_t{kMmaK});
  // Weights are read before the PDL wait only where they are model parameters (launch.cuh): not the bf16
  // scratch the fp8 path dequantises a weight into just before this launch (matmul_fp8_dequant.cu).
  const void* dequantised = matmul_scratch(0, stream, ScratchSlot::Fp8Weight);
  bool early_w = true;
  for (int i = 0; i < count; ++i) early_w = early_w && (dequantised == nullptr || parts[i].w != dequantised);
  for (int first = 0; first < count; first += kMaxParts) {
    const int n_parts = std::min(kMaxParts, count - first);
    int64_t widths[kMaxParts];
    for (int i = 0; i < n_parts; ++i) widths[i] = parts[first + i].N;
    const WgtPlan plan = choose_wgt_plan(a0.M, a0.K, widths, n_parts, sm_count(), shape, split);
    const WgtShape s = plan.shape;
    const bool slices = plan.split == WgtSplit::Slices;
    const ShapeDims d = dims_of(s);
    WgtParams p{};
    p.a = tensor_map(xb, a0.M, a0.K, ldxb, d.bm);
    p.M = a0.M;
    p.chunks = chunks;
    p.early_w = early_w;
    p.tiles_m = static_cast<int>(ceil_div(a0.M, int64_t{d.bm}));
    int64_t units = 0, tiles = 0;
    for (int i = 0; i < kMaxParts; ++i) {
      WgtPart& part = p.part[i];
      if (i >= n_parts) {
        part.units_end = INT_MAX;  // never reached: every unit is below p.units
        continue;
      }
      const MatmulArgs& a = parts[first + i];
      const KSplit ks = k_split(a.N, a.K, split_target_ctas());
      part.b = tensor_map(a.w, a.N, a.K, a.ldw, d.bn);
      part.y = a.y;
      part.ldy = a.ldy;
      part.N = a.N;
      part.cps = ks.cps;
      part.ktiles = static_cast<int>(serial_tiles(chunks, ks.cps));
      part.per = static_cast<int>(ceil_div(ks.cps, int64_t{kKT / kMmaK}));
      part.slices = slices ? ks.S : 1;
      part.pairs = pairs_ok(a);
      const int64_t part_tiles = int64_t{p.tiles_m} * ceil_div(a.N, int64_t{d.bn});
      SS_CHECK(tiles + part_tiles <= INT_MAX, "wgmma-tma matmul: {} x {} is more tiles than the kernel counts", a.M,
               a.N);
      part.tiles = static_cast<int>(part_tiles);
      part.tile0 = static_cast<int>(tiles);
      tiles += part_tiles;
      units += part_tiles * part.slices;
      SS_CHECK(units <= INT_MAX, "wgmma-tma matmul: {} x {} is more tiles than the kernel counts", a.M, a.N);
      part.units_end = static_cast<int>(units);
    }
    p.units = static_cast<int>(units);
    if (slices) {
      const FoldScratch f =
          fold_scratch(static_cast<size_t>(tiles) * size_t(d.bm) * size_t(d.bn), size_t(tiles), stream);
      p.fold = f.fold;
      p.flags = f.flags;
    }
    launch_shape(s, p, stream);
  }
  return true;
}

}  // namespace specserve::cuda::kernels
