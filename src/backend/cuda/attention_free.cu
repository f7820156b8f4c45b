// Attention in a free summation order: Ops::attention while the thread's MatmulOrder is Free (the DFlash
// drafter's forward, whose rows only steer which drafts are proposed; ops.h). The fixed-order kernels
// (attention.cu, attention_rows.cu) give every row the same bits alone or in any batch, and pay for it:
// each score is one 128-term fmaf chain, a CTA serves at most a few rows, and a drafter block of 16
// rows per sequence over a short context took 180 µs per 27B drafter layer at 16 sequences.
//
// Here the rows of one sequence (a drafter block's 16 rows, whether they see the same keys or each its
// own causal window) share each tile of 64 keys and values, rounded to bf16 into shared memory, and a
// CTA serves 64 (row, query head) pairs of one KV head with tensor cores, flash-attention style: warp w
// holds pairs 16w .. 16w + 15 as the rows of its m16n8k16 tiles, S = q kᵀ per tile, the online softmax
// on S's fragments (each row masked to its own window), O += P V with P's fragments as the A operand.
// Scores, softmax and sums in f32. With few CTAs (few sequences) the keys are split across CTAs and a
// second kernel merges the splits. Head dims 32, 64 and 128, two or more sequences; anything else keeps
// the fixed-order kernels (docs/history/GPU_PERF_NOTES.md, session 10, has the measurements).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cuda/attention_tc_fragments.cuh"
#include "backend/cuda/attention_tc_step.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/staging.h"

namespace specserve::cuda::kernels {

namespace {

constexpr int kTileKeys = 64;  // keys per tile
constexpr int kFreeWarps = 4;
constexpr int kFreeThreads = 32 * kFreeWarps;
constexpr int kFreePairs = 16 * kFreeWarps;  // (row, query head) pairs per CTA: one m16 tile per warp
constexpr int kFreeMaxRows = 32;             // rows per item (a longer run of one sequence's rows is cut)

// Shared memory, bf16: q of the pairs [kFreePairs][P], the tile's keys and values [kTileKeys][P], with
// the pitch P = HD + 8 putting the 8 rows a fragment load or an ldmatrix phase touches in distinct banks.
// The tiles' keys and values come in by cp.async, as the cache stores them (f32 or bf16: KV), into a
// staging area [2][kTileKeys][HD] (sized for f32) that
// overlays q's (q is in registers once the prologue is done), the next tile's while this one is
// computed. (Each thread loading its 32 pieces of a tile itself took 96 µs a 27B drafter layer at 16
// sequences against 65 µs so: docs/history/GPU_PERF_NOTES.md, session 11.)
template <int HD>
struct FreeLayout {
  static constexpr int kPitch = HD + 8;
  static constexpr int kQElems = kFreePairs * kPitch;
  static constexpr int kStageElems = 2 * kTileKeys * HD * 2;  // f32 as bf16 elements
  static constexpr int kQ = 0, kK = (kQElems > kStageElems ? kQElems : kStageElems), kV = kK + kTileKeys * kPitch;
  static constexpr int kElems = kV + kTileKeys * kPitch;
};

// The record of (row r, query head h, split z) in the scratch: the split's unnormalised sums [head_dim],
// its max and its sum.
__host__ __device__ constexpr int64_t free_partial_floats(int head_dim) { return head_dim + 2; }
__device__ __forceinline__ float* free_partial(float* part, int64_t r, int num_heads, int h, int splits, int z,
                                               int head_dim) {
  return part + ((r * num_heads + h) * splits + z) * free_partial_floats(head_dim);
}
__device__ __forceinline__ const float* free_partial(const float* part, int64_t r, int num_heads, int h, int splits,
                                                     int z, int head_dim) {
  return part + ((r * num_heads + h) * splits + z) * free_partial_floats(head_dim);
}

// items[i] .. items[i + 1]: the rows of item i (consecutive rows of one sequence); blockIdx.x =
// item * num_kv_heads + kv head, blockIdx.y = the item's pairs p0 = 64 * blockIdx.y .., pair p = (row
// p / G of the item, query head kvh * G + p % G). Warp w owns pairs 16w .. 16w + 15 as the rows of
// its m16n8k16 tiles (flash attention: S = q kᵀ per tile of 64 keys, the online softmax on S's
// fragments, O += P V with P's fragments reused as A). q, keys, values and P are rounded to bf16;
// scores, softmax and sums in f32.
template <int HD, class KV>
__global__ void __launch_bounds__(kFreeThreads)
    attention_free_kernel(const KvRow* rows, const int32_t* items, void* const* ptrs, Geo geo, const float* q,
                          int64_t ldq, int num_heads, float scale, float* out, int64_t ldo, float* part, int splits) {
  pdl_begin();
  using L = FreeLayout<HD>;
  constexpr int P = L::kPitch, KS = HD / 16, DT = HD / 8, NT = kTileKeys / 8;
  extern __shared__ __align__(16) uint16_t smem16[];
  uint16_t* s_q = smem16 + L::kQ;
  uint16_t* s_k = smem16 + L::kK;
  uint16_t* s_v = smem16 + L::kV;
  const int item = static_cast<int>(blockIdx.x / geo.num_kv_heads);
  const int kvh = static_cast<int>(blockIdx.x % geo.num_kv_heads);
  const int G = num_heads / geo.num_kv_heads;
  const int64_t r0 = items[item];
  const int p0 = static_cast<int>(blockIdx.y) * kFreePairs;
  const int np = min(kFreePairs, static_cast<int>(items[item + 1] - r0) * G - p0);
  if (np <= 0) return;
  // The keys any row of the item sees: [w0, w0 + n), the union of the rows' windows.
  const int64_t r1 = items[item + 1];
  int64_t w0 = rows[r0].window_start, last = rows[r0].position;
  for (int64_t r = r0 + 1; r < r1; ++r) {
    w0 = min(w0, int64_t{rows[r].window_start});
    last = max(last, int64_t{rows[r].position});
  }
  const int64_t n = last + 1 - w0;
  void* const* table = ptrs + rows[r0].table;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  auto pair_row = [&](int i) { return r0 + (p0 + i) / G; };
  auto pair_head = [&](int i) { return kvh * G + (p0 + i) % G; };
  // This thread's two rows of the warp's tile (lane / 4 and lane / 4 + 8): the keys each sees, as offsets
  // from w0 ([lo, hi]; empty for the pairs past the item's).
  int lo[2], hi[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * warp + (lane >> 2) + 8 * h;
    lo[h] = 1;
    hi[h] = 0;
    if (i < np) {
      const KvRow pr = rows[pair_row(i)];
      lo[h] = static_cast<int>(pr.window_start - w0);
      hi[h] = static_cast<int>(pr.position - w0);
    }
  }

  for (int e = tid; e < kFreePairs * (HD / 4); e += kFreeThreads) {
    const int i = e / (HD / 4), d = 4 * (e % (HD / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < np) {
      const float* src = q + pair_row(i) * ldq + int64_t{pair_head(i)} * HD + d;
      v = make_float4(src[0], src[1], src[2], src[3]);
    }
    store_bf16x4(s_q + i * P + d, v);
  }
  __syncthreads();
  uint32_t qa[KS][4];  // this warp's q as A fragments, all of HD
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const tc::RowCol rc = tc::a_frag(lane, r);
      qa[ks][r] = *reinterpret_cast<const uint32_t*>(s_q + (16 * warp + rc.row) * P + 16 * ks + rc.col);
    }
  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows lane / 4 and lane / 4 + 8 of the tile
  const uint32_t v_base = tc::smem_addr(s_v);

  // Split blockIdx.z of `splits` takes a contiguous run of the item's tiles (maybe none).
  const int64_t tiles = (n + kTileKeys - 1) / kTileKeys, per_split = (tiles + splits - 1) / splits;
  const int64_t t_begin = blockIdx.z * per_split * kTileKeys;
  const int64_t t_end = min(n, (blockIdx.z + 1) * per_split * kTileKeys);
  // Tile t0's keys (stage 0) and values (stage 1) by cp.async, zeros past the window.
  constexpr int kPer = 16 / static_cast<int>(sizeof(KV));  // elements of a 16-byte piece
  KV* s_stage = reinterpret_cast<KV*>(smem16);             // overlays s_q
  auto issue = [&](int64_t t0) {
    const int nk = n - t0 < kTileKeys ? static_cast<int>(n - t0) : kTileKeys;
    for (int e = tid; e < kTileKeys * (HD / kPer); e += kFreeThreads) {
      const int kk = e / (HD / kPer), d = kPer * (e % (HD / kPer));
      const KV* ksrc = reinterpret_cast<const KV*>(q);  // any valid address when nothing is read
      const KV* vsrc = ksrc;
      if (kk < nk) {
        const int64_t pos = w0 + t0 + kk;
        const KV* blk = static_cast<const KV*>(table[pos / kBlockSize]);
        const int slot = static_cast<int>(pos % kBlockSize);
        ksrc = blk + geo.offset(0, kvh, slot) + d;
        vsrc = blk + geo.offset(1, kvh, slot) + d;
      }
      tc::cp_async_cg(tc::smem_addr(s_stage + kk * HD + d), ksrc, kk < nk ? 16 : 0);
      tc::cp_async_cg(tc::smem_addr(s_stage + (kTileKeys + kk) * HD + d), vsrc, kk < nk ? 16 : 0);
    }
    tc::cp_async_commit();
  };
  __syncthreads();  // every warp has its q fragments: the staging may overwrite s_q
  if (t_begin < t_end) issue(t_begin);
  for (int64_t t0 = t_begin; t0 < t_end; t0 += kTileKeys) {
    tc::cp_async_wait_all();
    __syncthreads();  // the tile's copies landed, and the previous tile's keys and values are consumed
    for (int e = tid; e < kTileKeys * (HD / 4); e += kFreeThreads) {
      const int kk = e / (HD / 4), d = 4 * (e % (HD / 4));
      stage_bf16x4(s_k + kk * P + d, s_stage + kk * HD + d);
      stage_bf16x4(s_v + kk * P + d, s_stage + (kTileKeys + kk) * HD + d);
    }
    __syncthreads();  // the staging is free for the next tile, which comes in while this one is computed
    if (t0 + kTileKeys < t_end) issue(t0 + kTileKeys);
    float sc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
      const uint16_t* kr = s_k + (8 * nt + (lane >> 2)) * P + 2 * (lane & 3);
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr + 16 * ks);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + 16 * ks + 8);
        tc::mma_bf16(sc[nt], qa[ks], b0, b1);
      }
    }
    // The online softmax of rows lane / 4 (h = 0) and lane / 4 + 8 (h = 1): the quad of 4 lanes holds a row.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = static_cast<int>(t0) + 8 * nt + 2 * (lane & 3) + (e & 1);
        const int h = e >> 1;
        sc[nt][e] = key >= lo[h] && key <= hi[h] ? sc[nt][e] * scale : -INFINITY;
        mx[h] = fmaxf(mx[h], sc[nt][e]);
      }
    tc_expf_softmax_pv<kTileKeys, DT, P>(sc, mx, v_base, lane, o, m, l);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  if (splits == 1) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * warp + (lane >> 2) + 8 * (e >> 1);
        if (i < np)
          out[pair_row(i) * ldo + int64_t{pair_head(i)} * HD + 8 * dt + 2 * (lane & 3) + (e & 1)] =
              o[dt][e] / l[e >> 1];
      }
    return;
  }
  // This split's unnormalised sums, max and sum of each pair (free_partial), for attention_free_combine.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * warp + (lane >> 2) + 8 * h;
    if (i >= np) continue;
    float* rec = free_partial(part, pair_row(i), num_heads, pair_head(i), splits, static_cast<int>(blockIdx.z), HD);
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      rec[8 * dt + 2 * (lane & 3)] = o[dt][2 * h];
      rec[8 * dt + 2 * (lane & 3) + 1] = o[dt][2 * h + 1];
    }
    if ((lane & 3) == 0) {
      rec[HD] = m[h];
      rec[HD + 1] = l[h];
    }
  }
}

// out[r, h] from the splits' records: the sums rescaled to the largest max (a split that saw none of
// the row's keys has max -inf and weighs 0). One block of HD threads per (row, query head).
__global__ void attention_free_combine(const float* part, int num_heads, int head_dim, int splits, float* out,
                                       int64_t ldo) {
  pdl_begin();
  const int64_t r = blockIdx.x / num_heads;
  const int h = static_cast<int>(blockIdx.x % num_heads);
  float mx = -INFINITY;
  for (int z = 0; z < splits; ++z) mx = fmaxf(mx, free_partial(part, r, num_heads, h, splits, z, head_dim)[head_dim]);
  float o = 0.0f, L = 0.0f;
  for (int z = 0; z < splits; ++z) {
    const float* rec = free_partial(part, r, num_heads, h, splits, z, head_dim);
    const float w = rec[head_dim] == -INFINITY ? 0.0f : expf(rec[head_dim] - mx);
    L += rec[head_dim + 1] * w;
    o += rec[threadIdx.x] * w;
  }
  out[r * ldo + int64_t{h} * head_dim + threadIdx.x] = o / L;
}

template <int HD>
constexpr int free_smem() {
  return static_cast<int>(sizeof(uint16_t)) * FreeLayout<HD>::kElems;
}

// CTAs of attention_free_kernel<HD> one multiprocessor holds at once (registers and shared memory; the
// kernel's shared-memory limit is raised here, once, before any launch or query).
template <int HD, class KV>
int free_ctas_per_sm() {
  static const int n = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_free_kernel<HD, KV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    free_smem<HD>()));
    int v = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, attention_free_kernel<HD, KV>, kFreeThreads,
                                                             free_smem<HD>()));
    return v > 0 ? v : 1;
  }();
  return n;
}
template <class KV>
int free_ctas_per_sm(int head_dim) {
  return head_dim == 32   ? free_ctas_per_sm<32, KV>()
         : head_dim == 64 ? free_ctas_per_sm<64, KV>()
                          : free_ctas_per_sm<128, KV>();
}

template <int HD, class KV>
void launch_free(const KvArgs& kv, const int32_t* items, int64_t n_items, int max_rows, const float* q, int64_t ldq,
                 int num_heads, float scale, float* out, int64_t ldo, float* part, int splits, cudaStream_t stream) {
  const int smem = free_smem<HD>();
  (void)free_ctas_per_sm<HD, KV>();  // (sets the kernel's shared-memory limit)
  const int G = num_heads / kv.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(n_items * kv.num_kv_heads),
                  static_cast<unsigned>((max_rows * G + kFreePairs - 1) / kFreePairs), static_cast<unsigned>(splits));
  launch_pdl(attention_free_kernel<HD, KV>, grid, kFreeThreads, static_cast<size_t>(smem), stream, kv.rows, items,
             kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, out, ldo, part, splits);
  CUDA_CHECK_LAUNCH();
  if (splits > 1) {
    launch_pdl(attention_free_combine, static_cast<unsigned>(kv.R * num_heads), HD, 0, stream, part, num_heads, HD,
               splits, out, ldo);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

bool attention_free_supports(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

// The items are runs of consecutive rows of one sequence (the same block table), at most kFreeMaxRows
// each: a drafter block is one item whether its rows see the same keys, as in full attention, or each
// its own window, as in sliding layers. The key splits fill one wave of the kernel (the CTAs the device
// holds at once) when the items alone give fewer CTAs (few sequences), each split at least 2 tiles of the
// longest item; a second, partial wave measured slower than longer splits (27B drafter at 16
// sequences: 3 splits, 384 CTAs, 2.72-2.75 ms a propose; 2 splits, 256 CTAs, 2.62-2.63 ms; session 11).
AttentionFreePlan attention_free_plan(const KvArgs& kv, int num_heads) {
  AttentionFreePlan pl;
  if (kv.host_rows == nullptr || kv.R == 0 || num_heads == 0 || !attention_free_supports(kv.head_dim)) return pl;
  int64_t longest = 0, lo = 0, hi = 0;
  auto close = [&] { longest = std::max(longest, hi + 1 - lo); };
  for (int64_t r = 0; r < kv.R; ++r) {
    const KvRow& row = kv.host_rows[r];
    const bool joins =
        !pl.items.empty() && r - pl.items.back() < kFreeMaxRows && row.table == kv.host_rows[pl.items.back()].table;
    if (joins) {
      lo = std::min<int64_t>(lo, row.window_start);
      hi = std::max<int64_t>(hi, row.position);
      continue;
    }
    if (!pl.items.empty()) {
      pl.max_rows = std::max(pl.max_rows, static_cast<int>(r - pl.items.back()));
      close();
    }
    pl.items.push_back(static_cast<int32_t>(r));
    lo = row.window_start;
    hi = row.position;
  }
  pl.max_rows = std::max(pl.max_rows, static_cast<int>(kv.R - pl.items.back()));
  close();
  pl.items.push_back(static_cast<int32_t>(kv.R));
  const auto n_items = static_cast<int64_t>(pl.items.size()) - 1;
  // One sequence: the fixed-order kernels already spread its keys over chunks, and this kernel with its
  // splits and their merge measured slower (27B drafter propose at one sequence 2.16 vs 2.06 ms; 4
  // sequences 2.46 vs 2.55, 16 sequences 3.72 vs 4.29: docs/history/GPU_PERF_NOTES.md, session 10).
  if (n_items < 2 || n_items * kv.num_kv_heads > int64_t{1} << 30) return AttentionFreePlan{};
  const int G = num_heads / kv.num_kv_heads;
  const int64_t ctas = n_items * kv.num_kv_heads * ((pl.max_rows * G + kFreePairs - 1) / kFreePairs);
  const int64_t tiles = (longest + kTileKeys - 1) / kTileKeys;
  const int per_sm = kv.bf16 ? free_ctas_per_sm<KvBf16>(kv.head_dim) : free_ctas_per_sm<float>(kv.head_dim);
  const int64_t want = int64_t{per_sm} * sm_count() / ctas;
  pl.splits = static_cast<int>(std::clamp<int64_t>(std::min(want, tiles / 2), 1, 64));
  if (pl.splits > 1) pl.scratch_floats = kv.R * num_heads * pl.splits * free_partial_floats(kv.head_dim);
  return pl;
}

void attention_free(const KvArgs& kv, const AttentionFreePlan& plan, const float* q, int64_t ldq, int num_heads,
                    float scale, float* out, int64_t ldo, float* scratch, cudaStream_t stream) {
  const auto n_items = static_cast<int64_t>(plan.items.size()) - 1;
  // Read by the kernel enqueued next: the caller holds the staging lock (as for kv.rows).
  const auto* d_items =
      static_cast<const int32_t*>(Staging::global().stage(plan.items.data(), plan.items.size() * sizeof(int32_t)));
  auto launch = [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    if (kv.bf16)
      launch_free<HD, KvBf16>(kv, d_items, n_items, plan.max_rows, q, ldq, num_heads, scale, out, ldo, scratch,
                              plan.splits, stream);
    else
      launch_free<HD, float>(kv, d_items, n_items, plan.max_rows, q, ldq, num_heads, scale, out, ldo, scratch,
                             plan.splits, stream);
  };
  switch (kv.head_dim) {
    case 32: launch(std::integral_constant<int, 32>{}); break;
    case 64: launch(std::integral_constant<int, 64>{}); break;
    default: launch(std::integral_constant<int, 128>{}); break;
  }
}

}  // namespace specserve::cuda::kernels
