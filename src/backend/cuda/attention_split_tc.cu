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
// The walking form (attention_walk_tc_kernel, head dim 128), for calls whose items and KV heads alone fill half
// the GPU, whose items hold 16+ query pairs and whose rows have few chunks (verifies of 4+ rows of several
// sequences at short context; decodes stay split, see walks()): a CTA per
// (item, KV head) walks the item's chunks in order, each chunk exactly as the split kernel's CTA computes it (its
// own online softmax from the chunk's first key, the same steps, masks and zero-filled slots), and merges each
// chunk as it ends into its rows' running (M, L, O) in registers with the combine kernel's arithmetic on the
// values a record would hold (attention_common.cuh: the combine merges a row's records online in chunk order
// too), then writes the output and the o projection's copy itself. So a row's bits are the same in either form,
// and the choice may follow the call's shape. What it saves: the split form's CTA a chunk reloads the item's q,
// writes a record to memory that a second kernel reads back (at 16 sequences × 8 rows of the 8B at 512
// positions: 1,152 CTAs and 4,096 combine blocks a layer, 29 + 13 µs against ~8 µs of KV reads;
// docs/DECISIONS.md §3).
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

#include "backend/cuda/device_scope.h"
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
#include "backend/cuda/xb_out.cuh"

namespace specserve::cuda::kernels::attn_kernel {

namespace {

std::atomic<uint64_t> g_calls{0}, g_walk_calls{0};

// The keys of one step, at both head dims: 32 keys (16 KB of bf16 keys and values at head dim 128) let four
// CTAs share a multiprocessor, where 64 (the prefill kernel's step at head dim 128) let two or three: the
// 8B's decode at 32k positions took 6.54 against 6.63 ms, at 128k 10.37 against 10.53 (H200, session 18,
// docs/DECISIONS.md §3). The step is a constant of this kernel: every row it serves walks the same steps.
constexpr int kSplitStepKeys = 32;

// Query pairs a CTA holds at most: 16 a warp, 8 warps.
constexpr int kMaxPairs = 128;
// Rows an item holds at most (a verify of 15 drafted tokens and its bonus row).
constexpr int kMaxItemRows = 16;
// Chunks a call's rows may have for the walking form (Auto): 1,024 keys of 64-key chunks.
constexpr int kWalkMaxChunks = 16;

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

// The walking form's step buffers (attention_walk_tc_kernel): with one CTA walking all of an item's chunks,
// about one CTA a multiprocessor, S - 1 steps in flight keep the KV stream going (the split kernel's
// occupancy does that for it).
constexpr int kWalkStages = 4;
// Block-table entries the walking form copies to shared memory (kWalkMaxChunks chunks of 64 keys and a block
// more for a window start off the block grid).
constexpr int kWalkTableEntries = 80;

template <int HD>
constexpr int walk_smem_bytes(int mt) {
  return static_cast<int>(sizeof(uint16_t)) *
         (kWalkStages * SplitLayout<HD>::kStepElems + 16 * mt * SplitLayout<HD>::kPitch);
}

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

// What a CTA knows of its item and KV head, the same in both kernels: the item's rows [r0, r0 + nrows), its
// window start w0 and keys per chunk (every row's), its longest window n_max; this lane's pairs' positions in
// the window (pos, -1 for padding) and its warp's first one.
struct ItemCta {
  int r0, nrows, G, Q, w0, keys, n_max, kvh, warp_first;
  int pos[2];
  bool computes;
  void* const* table;
};

__device__ __forceinline__ ItemCta item_cta(const KvRow* rows, const int32_t* items, void* const* ptrs, int nkv,
                                            int num_heads, int lane, int warp) {
  ItemCta it;
  const int item = static_cast<int>(blockIdx.x) / nkv;
  it.kvh = static_cast<int>(blockIdx.x) % nkv;
  it.r0 = items[item];
  it.nrows = items[item + 1] - it.r0;
  it.G = num_heads / nkv;
  it.Q = it.nrows * it.G;
  const KvRow first = rows[it.r0];
  it.w0 = first.window_start;
  it.keys = static_cast<int>(attn::chunking(int64_t{first.position} + 1 - it.w0).keys);  // every row's
  it.n_max = 0;
  for (int i = 0; i < it.nrows; ++i) it.n_max = max(it.n_max, rows[it.r0 + i].position + 1 - it.w0);
  it.table = ptrs + first.table;
  // This lane's pairs qi = 16 warp + lane / 4 (+ 8). A warp whose tile holds no pair only loads.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int qi = 16 * warp + (lane >> 2) + 8 * h;
    it.pos[h] = qi < it.Q ? rows[it.r0 + qi / it.G].position - it.w0 : -1;
  }
  it.warp_first =
      __reduce_min_sync(0xffffffffu, min(it.pos[0] < 0 ? INT_MAX : it.pos[0], it.pos[1] < 0 ? INT_MAX : it.pos[1]));
  it.computes = 16 * warp < it.Q;
  return it;
}

// One step's keys and values (window keys t0 .. t0 + KB - 1) by cp.async into the step buffer at s_step (a
// shared-memory address), as stored; zeros past the item's last position (n_max). table[i - b0]: the block
// table's entry i (the sequence's table, b0 = 0, or a copy of its entries from b0 on). A thread copies the same 8
// dims of keys kk0, kk0 + kKeyStride, .. Commits no group.
template <int HD, int kThreads>
__device__ __forceinline__ void issue_step(const ItemCta& it, const Geo& geo, void* const* table, int b0,
                                           uint32_t s_step, int t0, int tid) {
  using L = SplitLayout<HD>;
  constexpr int P = L::kPitch, KB = L::KB;
  constexpr int kPieces = HD / 8, kKeyStride = kThreads / kPieces;
  static_assert(kThreads % kPieces == 0 && KB % kKeyStride == 0);
  const int dim0 = 8 * (tid % kPieces), kk0 = tid / kPieces;
  const int64_t k_off = geo.offset(0, it.kvh, 0) + dim0, v_off = geo.offset(1, it.kvh, 0) + dim0;
  const uint32_t s_lane = s_step + 2u * static_cast<uint32_t>(kk0 * P + dim0);
  const int blk_live = it.w0 / kBlockSize;  // a valid block for the copies that read nothing
#pragma unroll
  for (int kk = kk0, i = 0; i < KB / kKeyStride; ++i, kk += kKeyStride) {
    const int t = t0 + kk, p = it.w0 + t;
    const bool live = t < it.n_max;
    const KvBf16* blk = static_cast<const KvBf16*>(table[(live ? p / kBlockSize : blk_live) - b0]);
    const int64_t slot = live ? p % kBlockSize : 0;
    tc::cp_async_cg(s_lane + 2u * static_cast<uint32_t>(i * kKeyStride * P), blk + k_off + slot * HD, live ? 16 : 0);
    tc::cp_async_cg(s_lane + 2u * static_cast<uint32_t>((KB + i * kKeyStride) * P), blk + v_off + slot * HD,
                    live ? 16 : 0);
  }
}

// q's pairs as bf16 rows of s_q (zeros past the item's pairs), for the launch's mt m16 tiles.
template <int HD, int kThreads>
__device__ __forceinline__ void load_q(const ItemCta& it, const float* q, int64_t ldq, uint16_t* s_q, int mt, int tid) {
  constexpr int P = SplitLayout<HD>::kPitch;
  for (int e = tid; e < 16 * mt * (HD / 4); e += kThreads) {
    const int qi = e / (HD / 4), d = 4 * (e % (HD / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (qi < it.Q) {
      const float* src = q + int64_t{it.r0 + qi / it.G} * ldq + int64_t{it.kvh * it.G + qi % it.G} * HD + d;
      v = make_float4(src[0], src[1], src[2], src[3]);
    }
    store_bf16x4(s_q + qi * P + d, v);
  }
}

// A chunk's l for this lane's two rows: its partial sums joined over the quad (the value a record holds).
__device__ __forceinline__ void join_quad_l(float (&l)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
}

// Chunk c's records (O, m, l) of this lane's pairs that have the chunk (window keys from i_begin): l joined
// over the quad first. l is spent (the next chunk starts afresh).
template <int HD>
__device__ __forceinline__ void write_records(const ItemCta& it, float* part, int num_heads, int max_chunks, int c,
                                              int i_begin, int lane, int warp, const float (&o)[HD / 8][4],
                                              const float (&m)[2], float (&l)[2]) {
  constexpr int DT = HD / 8;
  join_quad_l(l);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int qi = 16 * warp + (lane >> 2) + 8 * h;
    if (it.pos[h] < i_begin) continue;  // padding (-1), or a row whose window ends before chunk c
    float* rec = partial_record(part, it.r0 + qi / it.G, num_heads, it.kvh * it.G + qi % it.G, max_chunks, c, HD);
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
      *reinterpret_cast<float2*>(rec + 8 * dt + 2 * (lane & 3)) = make_float2(o[dt][2 * h], o[dt][2 * h + 1]);
    if ((lane & 3) == 0) {
      rec[HD] = m[h];
      rec[HD + 1] = l[h];
    }
  }
}

template <int HD>
__device__ __forceinline__ void chunk_start(float (&o)[HD / 8][4], float (&m)[2], float (&l)[2]) {
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.0f;
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
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const ItemCta it = item_cta(rows, items, ptrs, geo.num_kv_heads, num_heads, lane, warp);
  const int c = static_cast<int>(blockIdx.y);
  const int i_begin = c * it.keys;
  const int i_end = min(i_begin + it.keys, it.n_max);
  if (i_end <= i_begin) return;  // no row of the item has chunk c
  const uint32_t smem_base = tc::smem_addr(smem16);
  auto issue = [&](int j) {
    issue_step<HD, kThreads>(it, geo, it.table, 0, smem_base + 2u * static_cast<uint32_t>((j & 1) * L::kStepElems),
                             i_begin + KB * j, tid);
    tc::cp_async_commit();
  };
  issue(0);  // it comes in while q is rounded into shared memory
  load_q<HD, kThreads>(it, q, ldq, s_q, mt, tid);

  const TcLaneAddrs lane_addrs = tc_lane_addrs<KB, P>(s_q + 16 * warp * P, lane);
  float o[DT][4], m[2], l[2];
  chunk_start<HD>(o, m, l);
  const int steps = (i_end - i_begin + KB - 1) / KB;
  for (int j = 0; j < steps; ++j) {
    tc::cp_async_wait_all();  // step j's copies: the only group in flight
    __syncthreads();          // they landed for every thread (and q, at j = 0); step j - 1's buffer is free
    if (j + 1 < steps) issue(j + 1);
    const int t0 = i_begin + KB * j;
    if (tid == 0 && t0 + 2 * KB < i_end) prefetch_l1(it.table + (it.w0 + t0 + 2 * KB) / kBlockSize);
    if (!it.computes) continue;
    const uint32_t kv_base = smem_base + 2u * static_cast<uint32_t>((j & 1) * L::kStepElems);
    tc_flash_step<HD, KB, P>(lane_addrs.q, kv_base, lane_addrs.k, lane_addrs.v, t0, t0 + KB - 1 > it.warp_first, it.pos,
                             lane, scale_log2, o, m, l);
  }
  if (it.computes) write_records<HD>(it, part, num_heads, max_chunks, c, i_begin, lane, warp, o, m, l);
}

// The walking form: grid (items × KV heads), head dim 128 (the running merge takes another 64 registers a
// thread; at 256 it would not fit beside O). The CTA walks all of its item's chunks in order, through one
// pipeline of kWalkStages step buffers across the chunks' boundaries (chunk c is still its own online softmax
// from c · keys, in the same steps), and as each chunk ends merges it into its rows' running (M, L, O) in
// registers, with the combine kernel's arithmetic on exactly the values a record would hold
// (merge_chunk_stats, merge_chunk_value); then writes out, and with xb.regs the o projection's bf16 copy of
// its rows' heads (as the combine kernel: the last head also the registers past the heads, and the same
// registers of padding rows R + r, 2R + r, ...). No records: nothing goes through memory between the chunks.
template <int W>
__global__ void __launch_bounds__(W * 32, 1)
    attention_walk_tc_kernel(const KvRow* rows, const int32_t* items, void* const* ptrs, Geo geo, const float* q,
                             int64_t ldq, int num_heads, float scale_log2, int mt, float* out, int64_t ldo, int64_t R,
                             XbOut xb) {
  pdl_begin();
  constexpr int HD = 128;
  using L = SplitLayout<HD>;
  constexpr int P = L::kPitch, KB = L::KB, DT = HD / 8, S = kWalkStages;
  constexpr int kThreads = W * 32;
  extern __shared__ __align__(16) uint16_t smem16[];
  uint16_t* s_q = smem16 + S * L::kStepElems;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const ItemCta it = item_cta(rows, items, ptrs, geo.num_kv_heads, num_heads, lane, warp);
  const uint32_t smem_base = tc::smem_addr(smem16);
  float o[DT][4], m[2], l[2];
  chunk_start<HD>(o, m, l);
  float run_o[DT][4], run_m[2] = {-INFINITY, -INFINITY}, run_l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) run_o[dt][0] = run_o[dt][1] = run_o[dt][2] = run_o[dt][3] = 0.0f;
  // Step g of the walk: chunk g / per_chunk, its step g % per_chunk (keys is a multiple of 2 KB; only the
  // last chunk may have fewer steps).
  const int per_chunk = it.keys / KB;
  const int n_chunks = (it.n_max + it.keys - 1) / it.keys;
  const int total = (n_chunks - 1) * per_chunk + ((it.n_max - (n_chunks - 1) * it.keys) + KB - 1) / KB;
  auto t0_of = [&](int g) { return (g / per_chunk) * it.keys + KB * (g % per_chunk); };
  // The item's block-table entries in shared memory when they fit (a window of up to ~1,000 keys: the calls Auto
  // walks), so that no step's copies wait on a global load of their block's address.
  __shared__ void* s_table[kWalkTableEntries];
  const int b_first = it.w0 / kBlockSize, n_blocks = (it.w0 + it.n_max - 1) / kBlockSize - b_first + 1;
  const bool table_here = n_blocks <= kWalkTableEntries;
  if (table_here) {
    for (int i = tid; i < n_blocks; i += kThreads) s_table[i] = it.table[b_first + i];
    __syncthreads();
  }
  void* const* tab = table_here ? s_table : it.table;
  const int tab_b0 = table_here ? b_first : 0;
  auto issue = [&](int g) {  // always one group, empty past the walk
    if (g < total)
      issue_step<HD, kThreads>(it, geo, tab, tab_b0, smem_base + 2u * static_cast<uint32_t>((g % S) * L::kStepElems),
                               t0_of(g), tid);
    tc::cp_async_commit();
  };
#pragma unroll
  for (int g = 0; g < S - 1; ++g) issue(g);
  load_q<HD, kThreads>(it, q, ldq, s_q, mt, tid);

  const TcLaneAddrs lane_addrs = tc_lane_addrs<KB, P>(s_q + 16 * warp * P, lane);
  for (int g = 0; g < total; ++g) {
    tc::cp_async_wait<S - 2>();  // step g's group (S - 1 + g committed, the last S - 2 may be in flight)
    __syncthreads();             // landed for every thread (and q, at g = 0); step g - 1's buffer is free
    issue(g + S - 1);
    if (!table_here && tid == 0 && g + S < total) prefetch_l1(it.table + (it.w0 + t0_of(g + S)) / kBlockSize);
    if (!it.computes) continue;
    const int c = g / per_chunk, j = g % per_chunk, t0 = t0_of(g);
    if (j == 0) chunk_start<HD>(o, m, l);
    const uint32_t kv_base = smem_base + 2u * static_cast<uint32_t>((g % S) * L::kStepElems);
    tc_flash_step<HD, KB, P>(lane_addrs.q, kv_base, lane_addrs.k, lane_addrs.v, t0, t0 + KB - 1 > it.warp_first, it.pos,
                             lane, scale_log2, o, m, l);
    if (j != per_chunk - 1 && g != total - 1) continue;  // chunk c goes on
    // Chunk c ends: l joined over the quad (a record's l), then merged into the rows that have the chunk.
    join_quad_l(l);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (it.pos[h] < c * it.keys) continue;  // padding (-1), or a row whose window ends before chunk c
      const ChunkWeights w = merge_chunk_stats(m[h], l[h], run_m[h], run_l[h]);
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        run_o[dt][2 * h] = merge_chunk_value(run_o[dt][2 * h], o[dt][2 * h], w);
        run_o[dt][2 * h + 1] = merge_chunk_value(run_o[dt][2 * h + 1], o[dt][2 * h + 1], w);
      }
    }
  }
  tc::cp_async_wait<0>();
  if (it.computes) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int qi = 16 * warp + (lane >> 2) + 8 * h;
      if (it.pos[h] < 0) continue;  // padding
      float* dst = out + int64_t{it.r0 + qi / it.G} * ldo + int64_t{it.kvh * it.G + qi % it.G} * HD;
      const float inv = 1.0f / run_l[h];
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
        *reinterpret_cast<float2*>(dst + 8 * dt + 2 * (lane & 3)) =
            make_float2(run_o[dt][2 * h] * inv, run_o[dt][2 * h + 1] * inv);
    }
  }
  if (xb.regs == nullptr) return;
  __syncthreads();  // the outputs, written by the block's threads
  const int64_t K = int64_t{num_heads} * HD;
  for (int qi = 0; qi < it.Q; ++qi) {
    const int64_t r = it.r0 + qi / it.G;
    const int h = it.kvh * it.G + qi % it.G;
    const int64_t k0 = int64_t{h} * HD, k1 = h == num_heads - 1 ? xb.pitch : k0 + HD;
    xb_write(xb, r, out + r * ldo, K, k0, k1, tid, kThreads);
    for (int64_t mr = R + r; mr < xb.rows; mr += R) xb_write(xb, mr, nullptr, K, k0, k1, tid, kThreads);
  }
}

template <int HD, int W>
void launch_split_w(const KvArgs& kv, const int32_t* items, int64_t n_items, int mt, const float* q, int64_t ldq,
                    int num_heads, float scale_log2, float* part, int max_chunks, cudaStream_t stream) {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_split_tc_kernel<HD, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    split_smem_bytes<HD>(W)));
  });
  const dim3 grid(static_cast<unsigned>(n_items * kv.num_kv_heads), static_cast<unsigned>(max_chunks));
  launch_pdl(attention_split_tc_kernel<HD, W>, grid, W * 32, static_cast<size_t>(split_smem_bytes<HD>(mt)), stream,
             kv.rows, items, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale_log2, part, max_chunks, mt);
  CUDA_CHECK_LAUNCH();
}

template <int W>
void launch_walk_w(const KvArgs& kv, const int32_t* items, int64_t n_items, int mt, const float* q, int64_t ldq,
                   int num_heads, float scale_log2, float* out, int64_t ldo, const XbOut& xb, cudaStream_t stream) {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_walk_tc_kernel<W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    walk_smem_bytes<128>(W)));
  });
  launch_pdl(attention_walk_tc_kernel<W>, static_cast<unsigned>(n_items * kv.num_kv_heads), W * 32,
             static_cast<size_t>(walk_smem_bytes<128>(mt)), stream, kv.rows, items, kv.ptrs, geo_of(kv), q, ldq,
             num_heads, scale_log2, mt, out, ldo, kv.R, xb);
  CUDA_CHECK_LAUNCH();
}

// 4 warps unless an item holds more than 64 pairs (which warp holds a pair changes none of its bits); q's
// shared memory for the m16 tiles the largest item needs (mt of them). The walking form at head dim 128 only.
template <int HD>
void launch_form(bool walk, const KvArgs& kv, const int32_t* items, int64_t n_items, int mt, const float* q,
                 int64_t ldq, int num_heads, float scale_log2, float* part, int max_chunks, float* out, int64_t ldo,
                 const XbOut& xb, cudaStream_t stream) {
  if constexpr (HD == 128) {
    if (walk && mt <= 4)
      return launch_walk_w<4>(kv, items, n_items, mt, q, ldq, num_heads, scale_log2, out, ldo, xb, stream);
    if (walk) return launch_walk_w<8>(kv, items, n_items, mt, q, ldq, num_heads, scale_log2, out, ldo, xb, stream);
  }
  if (mt <= 4)
    launch_split_w<HD, 4>(kv, items, n_items, mt, q, ldq, num_heads, scale_log2, part, max_chunks, stream);
  else
    launch_split_w<HD, 8>(kv, items, n_items, mt, q, ldq, num_heads, scale_log2, part, max_chunks, stream);
}

std::atomic<int> g_walk_mode{static_cast<int>(attn::SplitWalk::Auto)};

// Whether a call walks (one CTA per item and KV head) rather than splits (one per chunk too, then the combine
// kernel). The walk saves the split's per-chunk CTAs (each reloading q, writing a record that a second kernel
// reads back) where its own CTAs fill the machine and each has few chunks to walk.
bool walks(int64_t n_items, int nkv, int head_dim, int max_chunks, int64_t pairs) {
  if (head_dim != 128) return false;
  switch (static_cast<attn::SplitWalk>(g_walk_mode.load(std::memory_order_relaxed))) {
    case attn::SplitWalk::Never: return false;
    case attn::SplitWalk::Always: return true;
    case attn::SplitWalk::Auto: break;
  }
  // Measured (8B, 512 positions, H200; docs/DECISIONS.md §3): the walk wins where items hold 16+ query pairs a KV
  // head (verifies of 4+ rows: 16 × 16 rows 95 → 73 µs, 64 × 4 108 → 86, 32 × 8 91 → 63) and loses on decodes
  // (16 × 1 21 → 31 µs: a CTA's 17 serial steps against the split form's 2).
  return max_chunks > 1 && max_chunks <= kWalkMaxChunks && 2 * n_items * nkv >= sm_count() &&
         int64_t{pairs} >= 16 * n_items;
}

}  // namespace

bool split_tc_serves(const KvArgs& kv, int num_heads) {
  return kv.bf16 && kv.host_rows != nullptr && (kv.head_dim == 128 || kv.head_dim == 256) &&
         num_heads / kv.num_kv_heads <= kMaxPairs / kMaxItemRows;
}

bool launch_split_tc(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                     int max_chunks, float* out, int64_t ldo, const XbOut& xb, cudaStream_t stream) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const int G = num_heads / kv.num_kv_heads;
  const std::vector<int32_t> items = attn::split_items(kv.host_rows, kv.R, kMaxItemRows);
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x log2(e))
  const auto n_items = static_cast<int64_t>(items.size()) - 1;
  const bool walk = walks(n_items, kv.num_kv_heads, kv.head_dim, max_chunks, kv.R * G);
  if (walk) g_walk_calls.fetch_add(1, std::memory_order_relaxed);
  // A few thousand items a launch: a staged table past a staging segment would take the staging's big
  // buffer, which may hold kv.rows. Which launch serves a row changes none of its bits.
  constexpr int64_t kItemsPerLaunch = 4096;
  for (int64_t i0 = 0; i0 < n_items; i0 += kItemsPerLaunch) {
    const int64_t count = std::min(kItemsPerLaunch, n_items - i0);
    int max_rows = 0;
    for (int64_t i = i0; i < i0 + count; ++i) max_rows = std::max(max_rows, items[size_t(i + 1)] - items[size_t(i)]);
    const int mt = (max_rows * G + 15) / 16;
    // Read by the kernel enqueued next: the caller holds the staging lock (as for kv.rows).
    const auto* d_items = static_cast<const int32_t*>(
        Staging::global().stage(items.data() + i0, static_cast<size_t>(count + 1) * sizeof(int32_t)));
    if (kv.head_dim == 128)
      launch_form<128>(walk, kv, d_items, count, mt, q, ldq, num_heads, scale_log2, part, max_chunks, out, ldo, xb,
                       stream);
    else
      launch_form<256>(walk, kv, d_items, count, mt, q, ldq, num_heads, scale_log2, part, max_chunks, out, ldo, xb,
                       stream);
  }
  return walk;
}

}  // namespace specserve::cuda::kernels::attn_kernel

namespace specserve::cuda::kernels {

uint64_t attention_split_tc_calls() { return attn_kernel::g_calls.load(std::memory_order_relaxed); }
uint64_t attention_split_walk_calls() { return attn_kernel::g_walk_calls.load(std::memory_order_relaxed); }

}  // namespace specserve::cuda::kernels

namespace specserve::cuda::attn {

void set_split_walk(SplitWalk w) {
  kernels::attn_kernel::g_walk_mode.store(static_cast<int>(w), std::memory_order_relaxed);
}

}  // namespace specserve::cuda::attn
