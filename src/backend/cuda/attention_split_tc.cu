// Split-KV attention of decode and verify rows on tensor cores, for bf16 caches at head dims 128 and 256
// (Ops::attention; attention.cu's header has the scheme this replaces there and the combine kernel).
//
// THE RULE (docs/DESIGN.md §1.1): a row's output bits depend only on its own query, its sequence's keys
// and values in its window, the head dim and the scale — never on the other rows of the call or of its
// CTA. So a decode row (a call of one row) and the same row inside a verify (16 rows of one sequence), an
// extend or a batch of other sequences' rows give the same bits, and speculation changes no output.
//
// The kernel. A CTA takes one item (up to 16 consecutive rows of the call that share their chunks:
// attn::split_items, attention_rows.cuh — one block table, window start and chunk size), one KV head and
// one chunk c of the keys. Its query rows are the item's (row, query head) pairs of that KV head,
// qi = row · G + g, 16 to a warp as the rows of m16n8k16 tiles (up to 8 warps: 128 pairs); each step's
// keys and values are loaded once for all of them (the KV of a sequence is read once per step for all
// of its verify rows, not once per row). Chunk c is the keys window_start + [c·keys, (c + 1)·keys),
// keys = attn::chunking(n).keys (a function of the row's window n alone, the same for every row of the
// item), walked in steps of KB = kSplitStepKeys (32) keys from the chunk's start. Per step, on each
// warp's 16 rows (attention_tc_step.cuh, the prefill kernel's arithmetic): S = q kᵀ by mma.sync (q
// rounded to bf16, f32 accumulate, head dim in increasing 16-wide k-steps), keys past the row's position
// masked to -inf, the online softmax in base 2 (s = score · scale · log2 e; ex2.approx), P rounded to bf16
// and O += P V by mma.sync. The chunk's record (O, m, l; m in base 2) goes to the scratch row of
// (row, query head, c) in attention.cu's layout, and attention_combine_kernel<true> merges a row's chunks
// in chunk order with exp2.
//
// Why the rule holds:
// - An m16n8k16 output row depends only on its own A row and on B: a pair's scores and P V sums are the
//   same whichever pairs share its tile or its CTA, and whichever warp holds it; a row's quad of lanes
//   always holds the same key columns, so its max, its partial sums of l and their final reduction over
//   the quad are the same too (attention_prefill.cu's argument).
// - A row's chunks are a function of its own window: the same keys per chunk, the same chunk starts, the
//   same steps from each chunk's start, whichever item it is in. Items group rows only when their keys
//   per chunk agree, so no row is ever walked in another row's chunking.
// - An item's longer rows make a CTA walk keys past a shorter row's position, up to the item's last
//   position: in those keys the row's scores are -inf, so p = 0; in a step wholly past the row, its max
//   is unchanged and finite (the chunk's first key, c·keys ≤ the row's last, is visible to it in step 0),
//   the rescale factor is exactly 1 and P V adds products 0 · v = 0 — the bits of m, l and O do not
//   change, provided v is finite. Keys up to the item's last position are stored (the call stores every
//   row's before its attention), hence finite; slots past it may hold anything and are loaded as 0.
//   Exactly the same holds for a row alone: its own last step's keys past it are zeros instead of later
//   rows' values, and both give p = 0 and products 0. (The corner of attention_prefill.cu's note: an O
//   element exactly -0 would turn +0; with real values it never is exactly zero.)
// - A row without chunk c (its window ends before c·keys) writes no record; the combine reads only the
//   row's own chunks.
// - The shortcuts of the step (mask only where a key may lie past a row of the warp, rescale skipped where
//   every factor of the warp is 1) change no bits (attention_prefill.cu).
// These are not Ops::attention's bits of an f32 cache (the CUDA-core kernels in attention.cu and
// attention_rows.cu serve those, unchanged): a bf16 cache's decode rows round q and p to bf16 here.
// tests/backend_cuda/test_cuda_attention_split_tc.cpp checks the CPU within bf16 tolerance and a row's bits
// alone, inside a verify of 16 rows, beside other sequences' rows and across chunk-size changes.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <vector>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/attention_split_tc.h"
#include "backend/cuda/attention_tc_fragments.cuh"
#include "backend/cuda/attention_tc_step.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/staging.h"

namespace specserve::cuda::kernels::attn_kernel {

namespace {

std::atomic<uint64_t> g_calls{0};

// The keys of one step, at both head dims: 32 keys (16 KB of bf16 keys and values at head dim 128) let four
// CTAs share a multiprocessor, where 64 (the prefill kernel's step at head dim 128) let two or three: the
// 8B's decode at 32k positions took 6.54 against 6.63 ms, at 128k 10.37 against 10.53 (H200, session 18,
// docs/DECISIONS.md §3). The step is a constant of this kernel: every row it serves walks the same steps.
constexpr int kSplitStepKeys = 32;

// Query pairs a CTA holds at most: 16 a warp, 8 warps.
constexpr int kMaxPairs = 128;
// Rows an item holds at most (a verify of 15 drafted tokens and its bonus row).
constexpr int kMaxItemRows = 16;

// Shared memory in bf16 elements: two steps' keys then values [2][2][KB][P] (cp.async lands step j + 1 in one
// while step j is computed from the other), then q [16 MT][P] for the launch's MT m16 tiles (a decode's one
// tile leaves room for a third CTA a multiprocessor at head dim 128). P = HD + 8 (conflict-free ldmatrix).
template <int HD>
struct SplitLayout {
  static constexpr int KB = kSplitStepKeys;
  static constexpr int kPitch = HD + 8;
  static constexpr int kStepElems = 2 * KB * kPitch;
  static constexpr int kQ = 2 * kStepElems;
  static constexpr int elems(int mt) { return kQ + 16 * mt * kPitch; }
};

template <int HD>
constexpr int split_smem_bytes(int mt) {
  return static_cast<int>(sizeof(uint16_t)) * SplitLayout<HD>::elems(mt);
}

// CTAs a multiprocessor should hold: at head dim 128 four of 4 warps (a decode's 40 KB of shared memory,
// 128 registers a thread), so that the 64 chunks of each of the 8B's 8 KV heads (512 CTAs) run in one wave
// of 4 x 132; at head dim 256 the registers of O bound it (two).
template <int HD, int W>
constexpr int split_min_ctas() {
  return HD == 128 ? 16 / W : 1;
}

// Grid (items × KV heads, max_chunks); W warps, the first mt (at most W) holding m16 tiles of pairs. items:
// the call's items' first rows, then the end of the last (attn::split_items). part: the combine's scratch
// records (attention.cu).
template <int HD, int W>
__global__ void __launch_bounds__(W * 32, split_min_ctas<HD, W>())
    attention_split_tc_kernel(const KvRow* rows, const int32_t* items, void* const* ptrs, Geo geo, const float* q,
                              int64_t ldq, int num_heads, float scale_log2, float* part, int max_chunks, int mt) {
  pdl_begin();
  using L = SplitLayout<HD>;
  constexpr int P = L::kPitch, KB = L::KB, DT = HD / 8;
  constexpr int kThreads = W * 32;
  extern __shared__ __align__(16) uint16_t smem16[];
  uint16_t* s_q = smem16 + L::kQ;
  const int nkv = geo.num_kv_heads;
  const int item = static_cast<int>(blockIdx.x) / nkv, kvh = static_cast<int>(blockIdx.x) % nkv;
  const int c = static_cast<int>(blockIdx.y);
  const int r0 = items[item], nrows = items[item + 1] - r0;
  const int G = num_heads / nkv, Q = nrows * G;
  const KvRow first = rows[r0];
  const int w0 = first.window_start;
  const int keys = static_cast<int>(attn::chunking(int64_t{first.position} + 1 - w0).keys);  // every row's
  const int i_begin = c * keys;
  int n_max = 0;  // the item's longest window
  for (int i = 0; i < nrows; ++i) n_max = max(n_max, rows[r0 + i].position + 1 - w0);
  const int i_end = min(i_begin + keys, n_max);
  if (i_end <= i_begin) return;  // no row of the item has chunk c
  void* const* table = ptrs + first.table;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;

  // This lane's pairs qi = 16 warp + lane / 4 (+ 8): their positions in the window (-1: padding), and the
  // warp's first (smallest) one. A warp whose tile holds no pair only loads.
  int pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int qi = 16 * warp + (lane >> 2) + 8 * h;
    pos[h] = qi < Q ? rows[r0 + qi / G].position - w0 : -1;
  }
  const int warp_first =
      __reduce_min_sync(0xffffffffu, min(pos[0] < 0 ? INT_MAX : pos[0], pos[1] < 0 ? INT_MAX : pos[1]));
  const bool computes = 16 * warp < Q;

  // Step j's keys and values (window keys i_begin + KB j ..) by cp.async into buffer j % 2, as stored;
  // zeros past the item's last position. A thread copies the same 8 dims of keys kk0, kk0 + kKeyStride, ..
  constexpr int kPieces = HD / 8, kKeyStride = kThreads / kPieces;
  static_assert(kThreads % kPieces == 0 && KB % kKeyStride == 0);
  const int dim0 = 8 * (tid % kPieces), kk0 = tid / kPieces;
  const int64_t k_off = geo.offset(0, kvh, 0) + dim0, v_off = geo.offset(1, kvh, 0) + dim0;
  const uint32_t s_lane = tc::smem_addr(smem16 + kk0 * P + dim0);
  const int blk_live = (w0 + i_begin) / kBlockSize;  // a valid block for the copies that read nothing
  auto issue = [&](int j) {
    const uint32_t s_kb = s_lane + 2u * static_cast<uint32_t>((j & 1) * L::kStepElems);
    const int t0 = i_begin + KB * j;
#pragma unroll
    for (int kk = kk0, i = 0; i < KB / kKeyStride; ++i, kk += kKeyStride) {
      const int t = t0 + kk, p = w0 + t;
      const bool live = t < i_end;
      const KvBf16* blk = static_cast<const KvBf16*>(table[live ? p / kBlockSize : blk_live]);
      const int64_t slot = live ? p % kBlockSize : 0;
      tc::cp_async_cg(s_kb + 2u * static_cast<uint32_t>(i * kKeyStride * P), blk + k_off + slot * HD, live ? 16 : 0);
      tc::cp_async_cg(s_kb + 2u * static_cast<uint32_t>((KB + i * kKeyStride) * P), blk + v_off + slot * HD,
                      live ? 16 : 0);
    }
    tc::cp_async_commit();
  };
  issue(0);  // it comes in while q is rounded into shared memory

  // q's pairs as bf16 rows (zeros past the item's pairs).
  for (int e = tid; e < 16 * mt * (HD / 4); e += kThreads) {
    const int qi = e / (HD / 4), d = 4 * (e % (HD / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (qi < Q) {
      const float* src = q + int64_t{r0 + qi / G} * ldq + int64_t{kvh * G + qi % G} * HD + d;
      v = make_float4(src[0], src[1], src[2], src[3]);
    }
    store_bf16x4(s_q + qi * P + d, v);
  }

  const TcLaneAddrs lane_addrs = tc_lane_addrs<KB, P>(s_q + 16 * warp * P, lane);
  const uint32_t q_lane = lane_addrs.q, k_lane = lane_addrs.k, v_lane = lane_addrs.v;
  const uint32_t smem_base = tc::smem_addr(smem16);

  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int steps = (i_end - i_begin + KB - 1) / KB;
  for (int j = 0; j < steps; ++j) {
    tc::cp_async_wait_all();  // step j's copies: the only group in flight
    __syncthreads();          // they landed for every thread (and q, at j = 0); step j - 1's buffer is free
    if (j + 1 < steps) issue(j + 1);
    const int t0 = i_begin + KB * j;
    if (tid == 0 && t0 + 2 * KB < i_end) prefetch_l1(table + (w0 + t0 + 2 * KB) / kBlockSize);
    if (!computes) continue;
    const uint32_t kv_base = smem_base + 2u * static_cast<uint32_t>((j & 1) * L::kStepElems);
    tc_flash_step<HD, KB, P>(q_lane, kv_base, k_lane, v_lane, t0, t0 + KB - 1 > warp_first, pos, lane, scale_log2, o, m,
                             l);
  }
  if (!computes) return;

    // The records of the pairs that have chunk c: l joined over the quad, then O, m and l.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int qi = 16 * warp + (lane >> 2) + 8 * h;
    if (pos[h] < i_begin) continue;  // padding (-1), or a row whose window ends before chunk c
    float* rec = partial_record(part, r0 + qi / G, num_heads, kvh * G + qi % G, max_chunks, c, HD);
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
      *reinterpret_cast<float2*>(rec + 8 * dt + 2 * (lane & 3)) = make_float2(o[dt][2 * h], o[dt][2 * h + 1]);
    if ((lane & 3) == 0) {
      rec[HD] = m[h];
      rec[HD + 1] = l[h];
    }
  }
}

template <int HD, int W>
void launch_split_w(const KvArgs& kv, const int32_t* items, int64_t n_items, int mt, const float* q, int64_t ldq,
                    int num_heads, float scale_log2, float* part, int max_chunks, cudaStream_t stream) {
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_split_tc_kernel<HD, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    split_smem_bytes<HD>(W)));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(n_items * kv.num_kv_heads), static_cast<unsigned>(max_chunks));
  launch_pdl(attention_split_tc_kernel<HD, W>, grid, W * 32, static_cast<size_t>(split_smem_bytes<HD>(mt)), stream,
             kv.rows, items, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale_log2, part, max_chunks, mt);
  CUDA_CHECK_LAUNCH();
}

template <int HD>
void launch_split(const KvArgs& kv, const int32_t* items, int64_t n_items, int max_pairs, const float* q, int64_t ldq,
                  int num_heads, float scale_log2, float* part, int max_chunks, cudaStream_t stream) {
  // 4 warps unless an item holds more than 64 pairs (which warp holds a pair changes none of its bits); q's
  // shared memory for the m16 tiles the largest item needs.
  const int mt = (max_pairs + 15) / 16;
  if (mt <= 4)
    launch_split_w<HD, 4>(kv, items, n_items, mt, q, ldq, num_heads, scale_log2, part, max_chunks, stream);
  else
    launch_split_w<HD, 8>(kv, items, n_items, mt, q, ldq, num_heads, scale_log2, part, max_chunks, stream);
}

}  // namespace

bool split_tc_serves(const KvArgs& kv, int num_heads) {
  return kv.bf16 && kv.host_rows != nullptr && (kv.head_dim == 128 || kv.head_dim == 256) &&
         num_heads / kv.num_kv_heads <= kMaxPairs / kMaxItemRows;
}

void launch_split_tc(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                     int max_chunks, cudaStream_t stream) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const int G = num_heads / kv.num_kv_heads;
  const std::vector<int32_t> items = attn::split_items(kv.host_rows, kv.R, kMaxItemRows);
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x log2(e))
  // A few thousand items a launch: a staged table past a staging segment would take the staging's big
  // buffer, which may hold kv.rows. Which launch serves a row changes none of its bits.
  constexpr int64_t kItemsPerLaunch = 4096;
  const auto n_items = static_cast<int64_t>(items.size()) - 1;
  for (int64_t i0 = 0; i0 < n_items; i0 += kItemsPerLaunch) {
    const int64_t count = std::min(kItemsPerLaunch, n_items - i0);
    int max_rows = 0;
    for (int64_t i = i0; i < i0 + count; ++i) max_rows = std::max(max_rows, items[size_t(i + 1)] - items[size_t(i)]);
    // Read by the kernel enqueued next: the caller holds the staging lock (as for kv.rows).
    const auto* d_items = static_cast<const int32_t*>(
        Staging::global().stage(items.data() + i0, static_cast<size_t>(count + 1) * sizeof(int32_t)));
    if (kv.head_dim == 128)
      launch_split<128>(kv, d_items, count, max_rows * G, q, ldq, num_heads, scale_log2, part, max_chunks, stream);
    else
      launch_split<256>(kv, d_items, count, max_rows * G, q, ldq, num_heads, scale_log2, part, max_chunks, stream);
  }
}

}  // namespace specserve::cuda::kernels::attn_kernel

namespace specserve::cuda::kernels {

uint64_t attention_split_tc_calls() { return attn_kernel::g_calls.load(std::memory_order_relaxed); }

}  // namespace specserve::cuda::kernels
