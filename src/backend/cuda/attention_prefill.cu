// Prefill attention on tensor cores (Ops::attention_prefill; docs/DESIGN.md §1.2, docs/KERNELS.md §3):
// flash attention over a prompt's rows, deterministic per row.
//
// THE RULE. A row's output bits depend only on its own query, its sequence's keys and values at positions
// 0 .. its position, the head dim and the scale — never on which other rows share the call or its query
// tile, on the chunks its prompt was cut into, or on R. They need not equal Ops::attention's.
//
// The kernels. A CTA takes one query tile (up to 64 consecutive rows of one sequence at consecutive
// positions; attention_prefill_plan) and one query head, or two of the same KV head (sharing each step's
// keys and values: prefill_heads()); warp w holds the tile's rows 16 (w % 4) .. 16 (w % 4) + 15 of head
// w / 4 as the rows of its m16n8k16 tiles. Keys are walked in steps of KB (64 for head dim 128, 32 for 256) at
// ABSOLUTE positions [KB·j, KB·j + KB), j = 0 up to the step holding the tile's last row. Per step: S = q kᵀ
// by mma.sync (q rounded to bf16, f32 accumulate, the head dim in 16-wide k-steps in increasing order);
// keys past the row's position get the score -inf; the online softmax of each row in f32 (running max
// m, rescale of l and O by e^(m_old - m_new), p = e^(s - m_new), l += p); P rounded to bf16 and
// O += P V by mma.sync (the step's keys in 16-wide k-steps in increasing order). out = O / l.
// Two kernels do this (prefill_kernel(); their bits differ, each keeps the rule):
// - pipelined (a bf16 cache, by default): the step's bf16 keys and values go by cp.async straight into
//   bf16 tiles of pitch HD + 8 (conflict-free ldmatrix), double-buffered: step j + 1 comes in while j is
//   computed, one barrier a step. q, k and v fragments by ldmatrix.x4 (a quarter of the 32-bit loads'
//   instructions); scores scaled by scale · log2(e) and exponentiated by ex2.approx (one MUFU op, against
//   expf's ~10 instructions); the key mask only in steps that reach past the warp's first row; the
//   rescale of O skipped when every factor of the warp is exactly 1. At head dim 128, q stays in shared
//   memory so that a thread fits 128 registers: two CTAs (16 warps) a multiprocessor.
// - staged (an f32 cache always; a bf16 one by set_prefill_kernel): the f32 or bf16 keys and values come
//   by cp.async into an f32-sized staging area and are rounded to bf16 tiles in a second pass; exp by expf.
//
// Why the rule holds:
// - An m16n8k16 output row depends only on its own A row and on B: a row's scores, and its P V sums,
//   are the same whichever rows sit beside it in the warp's tile (padding rows are zero queries), and
//   whichever warp computes them (one or two heads per CTA give the same bits).
// - Every row sees the same sequence of steps 0, 1, .. up to the step holding its own position; the
//   steps are at absolute positions, so they do not depend on where the prompt was cut or where the
//   tile starts. A row's quad of lanes always holds key columns 2·(lane % 4) + {0, 1} of each 8-key
//   tile, so its per-lane partial sums of l and their final reduction over the quad are the same too.
// - A tile's later rows make it walk steps past a row's own. In such a step all of the row's keys are
//   masked: its step max is -inf, m_new = m_old (finite: position 0 is visible in step 0, so m is finite
//   from step 0 on), the rescale exp(m_old - m_new) = exp(0) = 1 exactly, every p = exp(-inf) = 0, so
//   l and O are multiplied by 1 and l gains +0, and P V adds products 0 · v = 0 to O: the bits of m, l
//   and O are unchanged — provided v is finite. Values at positions up to the tile's last row's are
//   stored (every earlier chunk's and this tile's own), hence finite; slots past the tile's last
//   position may hold anything (NaN garbage of positions not yet written), so they are loaded as 0.
//   The same argument covers the keys of the row's own last step past its position: whether they hold
//   stored values (a later row of the same tile) or zeros (the tile ends at the row), p = 0 and the
//   products are exactly 0. (One corner is left: an O element that is exactly -0 would turn +0 by a
//   masked step's +0 products; with real or random values it is never exactly zero.)
// - The pipelined kernel's shortcuts change no row's bits. A step unmasked for a warp (its last key at
//   most the warp's first row's position) has every key visible to every real row of the warp, and a
//   visible key's score is the same masked or not; padding rows, unmasked, write nothing. The factor of
//   an unchanged max is set to 1 (not computed: the argument above needs it exactly 1), 2^-inf = +0 by
//   ex2.approx, and x · 1 = x, so skipping the rescale where all factors are 1 is the rescale.
// - The per-step key count KB depends on the head dim only.
// tests/backend_cuda/test_cuda_attention_prefill.cpp checks a prompt in one call against four other
// cuttings, the rows alone against the rows beside other sequences' and one head per CTA against two, bit
// for bit, and the CPU within bf16 tolerance, for both kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/staging.h"

namespace specserve::cuda::kernels {

namespace {

constexpr int kRowWarps = 4;             // per query head of a CTA
constexpr int kRows = kPrefillTileRows;  // one m16 tile per warp
static_assert(kRows == 16 * kRowWarps);
// Threads of a CTA serving H2 query heads.
template <int H2>
constexpr int prefill_threads() {
  return 32 * kRowWarps * H2;
}

std::atomic<uint64_t> g_calls{0};
std::atomic<int> g_heads{static_cast<int>(PrefillHeads::Auto)};
std::atomic<int> g_kernel{static_cast<int>(PrefillKernel::Pipelined)};

// Per head dim: the keys of one step and whether q's A fragments stay in registers for the whole key loop
// (head dim 256 keeps them in shared memory and takes 32-key steps: O alone is 128 registers a thread).
template <int HD>
struct PrefillShape;
template <>
struct PrefillShape<128> {
  static constexpr int kStepKeys = 64;
  static constexpr bool kQInRegs = true;
};
template <>
struct PrefillShape<256> {
  static constexpr int kStepKeys = 32;
  static constexpr bool kQInRegs = false;
};

// Shared memory in bf16 elements: the staging area of a step's keys then values [2][KB][HD] as the cache
// stores them (f32 or bf16: the area is sized for f32; cp.async
// lands the next step's there while this one is computed), q [H2][kRows][P] (overlaying the staging when
// its fragments go to registers before the key loop), the step's keys and values [KB][P]. The pitch P =
// HD + 8 puts the 8 rows a fragment load or an ldmatrix phase touches in distinct banks.
template <int HD, int H2>
struct PrefillLayout {
  static constexpr int KB = PrefillShape<HD>::kStepKeys;
  static constexpr bool kQRegs = PrefillShape<HD>::kQInRegs;
  static constexpr int kPitch = HD + 8;
  static constexpr int kQElems = H2 * kRows * kPitch;
  static constexpr int kStageElems = 2 * KB * HD * 2;
  static constexpr int kStage = 0;
  static constexpr int kQ = kQRegs ? 0 : kStageElems;
  static constexpr int kK = kQRegs ? (kQElems > kStageElems ? kQElems : kStageElems) : kStageElems + kQElems;
  static constexpr int kV = kK + KB * kPitch;
  static constexpr int kElems = kV + KB * kPitch;
};

template <int HD, int H2>
constexpr int prefill_smem_bytes() {
  return static_cast<int>(sizeof(uint16_t)) * PrefillLayout<HD, H2>::kElems;
}

// B fragments of two adjacent 8-column tiles of V (k = 16 keys from `addr`'s rows, n = dims), read
// transposed from its [key][dim] rows.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void store_bf16x4(uint16_t* dst, float4 v) {
  *reinterpret_cast<uint2*>(dst) = make_uint2(tc::pack_bf16x2(v.x, v.y), tc::pack_bf16x2(v.z, v.w));
}

// Four staged cache elements at src into dst's bf16 row: an f32 cache's rounded to bf16 (store_bf16x4),
// a bf16 cache's as they are (the same bits store_bf16x4 gives for f32 values already bf16).
__device__ __forceinline__ void stage_bf16x4(uint16_t* dst, const float* src) {
  store_bf16x4(dst, *reinterpret_cast<const float4*>(src));
}
__device__ __forceinline__ void stage_bf16x4(uint16_t* dst, const KvBf16* src) {
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
}

// This lane's A fragment of k-step ks of the warp's 16 query rows, from q's bf16 rows in shared memory.
template <int P>
__device__ __forceinline__ void q_fragment(const uint16_t* s_q, int warp, int lane, int ks, uint32_t (&a)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const tc::RowCol rc = tc::a_frag(lane, r);
    a[r] = *reinterpret_cast<const uint32_t*>(s_q + (16 * warp + rc.row) * P + 16 * ks + rc.col);
  }
}

// blockIdx.x: the query heads H2 x .. H2 x + H2 - 1 (of one KV head); blockIdx.y: the tile
// (tiles[kPrefillTileInts * y ..]: first row, rows, the last row's position). The arithmetic and why it
// keeps the rule: the file's header.
template <int HD, int H2, class KV>
__global__ void __launch_bounds__(prefill_threads<H2>())
    attention_prefill_kernel(const KvRow* rows, const int32_t* tiles, void* const* ptrs, Geo geo, const float* q,
                             int64_t ldq, int num_heads, float scale, float* out, int64_t ldo) {
  pdl_begin();
  using L = PrefillLayout<HD, H2>;
  constexpr int P = L::kPitch, KB = L::KB, KS = HD / 16, DT = HD / 8, NT = KB / 8;
  constexpr int kThreads = prefill_threads<H2>();
  extern __shared__ __align__(16) uint16_t smem16[];
  KV* s_stage = reinterpret_cast<KV*>(smem16 + L::kStage);
  uint16_t* s_q = smem16 + L::kQ;
  uint16_t* s_k = smem16 + L::kK;
  uint16_t* s_v = smem16 + L::kV;
  const int head0 = static_cast<int>(blockIdx.x) * H2;
  const int kvh = head0 / (num_heads / geo.num_kv_heads);
  const int32_t* tile = tiles + int64_t{blockIdx.y} * kPrefillTileInts;
  const int64_t r0 = tile[0];
  const int nr = tile[1];
  const int64_t n = int64_t{tile[2]} + 1;  // the keys the tile's rows see: positions 0 .. its last row's
  void* const* table = ptrs + rows[r0].table;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const int warp = (tid >> 5) % kRowWarps;  // the warp's rows: 16 warp .. 16 warp + 15
  const int head = head0 + (tid >> 5) / kRowWarps;
  const uint16_t* s_qh = s_q + (head - head0) * kRows * P;  // the warp's head's q
  // The positions of this thread's two rows of the warp's tile (lane / 4 and lane / 4 + 8); -1 (no key
  // visible) for the padding rows past the tile's.
  int pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * warp + (lane >> 2) + 8 * h;
    pos[h] = i < nr ? rows[r0 + i].position : -1;
  }

  for (int e = tid; e < H2 * kRows * (HD / 4); e += kThreads) {
    const int hi = e / (kRows * (HD / 4)), i = e / (HD / 4) % kRows, d = 4 * (e % (HD / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < nr) {
      const float* src = q + (r0 + i) * ldq + int64_t{head0 + hi} * HD + d;
      v = make_float4(src[0], src[1], src[2], src[3]);
    }
    store_bf16x4(s_q + (hi * kRows + i) * P + d, v);
  }
  __syncthreads();
  uint32_t qa[L::kQRegs ? KS : 1][4];  // q's A fragments, all of HD, when they stay in registers
  if constexpr (L::kQRegs) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) q_fragment<P>(s_qh, warp, lane, ks, qa[ks]);
  }
  __syncthreads();  // every warp has its q fragments: the staging may overwrite an overlaid s_q

  // Step t0's keys (first half of the staging) and values (second half) by cp.async, as stored; zeros
  // past the tile's last position (slots not yet written may hold NaN).
  constexpr int kPer = 16 / static_cast<int>(sizeof(KV));  // elements of a 16-byte piece
  const KV* const block0 = static_cast<const KV*>(table[0]);
  auto issue = [&](int64_t t0) {
    const int nk = n - t0 < KB ? static_cast<int>(n - t0) : KB;
    for (int e = tid; e < KB * (HD / kPer); e += kThreads) {
      const int kk = e / (HD / kPer), d = kPer * (e % (HD / kPer));
      const KV* ksrc = block0;  // any valid, 16-byte aligned address when nothing is read
      const KV* vsrc = block0;
      if (kk < nk) {
        const int64_t p = t0 + kk;
        const KV* blk = static_cast<const KV*>(table[p / kBlockSize]);
        const int slot = static_cast<int>(p % kBlockSize);
        ksrc = blk + geo.offset(0, kvh, slot) + d;
        vsrc = blk + geo.offset(1, kvh, slot) + d;
      }
      tc::cp_async_cg(tc::smem_addr(s_stage + kk * HD + d), ksrc, kk < nk ? 16 : 0);
      tc::cp_async_cg(tc::smem_addr(s_stage + (KB + kk) * HD + d), vsrc, kk < nk ? 16 : 0);
    }
    tc::cp_async_commit();
  };

  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // this lane's partial l of its key columns
  const uint32_t v_base = tc::smem_addr(s_v);
  issue(0);
  for (int64_t t0 = 0; t0 < n; t0 += KB) {
    tc::cp_async_wait_all();
    __syncthreads();  // the step's copies landed, and the previous step's keys and values are consumed
    for (int e = tid; e < KB * (HD / 4); e += kThreads) {
      const int kk = e / (HD / 4), d = 4 * (e % (HD / 4));
      stage_bf16x4(s_k + kk * P + d, s_stage + kk * HD + d);
      stage_bf16x4(s_v + kk * P + d, s_stage + (KB + kk) * HD + d);
    }
    __syncthreads();  // the staging is free for the next step, which comes in while this one is computed
    if (t0 + KB < n) issue(t0 + KB);

    // S = q kᵀ: each score one chain of mma k-steps over the head dim in increasing order.
    float sc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t a[4];
      if constexpr (L::kQRegs) {
#pragma unroll
        for (int r = 0; r < 4; ++r) a[r] = qa[ks][r];
      } else {
        q_fragment<P>(s_qh, warp, lane, ks, a);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint16_t* kr = s_k + (8 * nt + (lane >> 2)) * P + 2 * (lane & 3) + 16 * ks;
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + 8);
        tc::mma_bf16(sc[nt], a, b0, b1);
      }
    }

    // The online softmax of rows lane / 4 (h = 0) and lane / 4 + 8 (h = 1): the quad of 4 lanes holds a row.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = t0 + 8 * nt + 2 * (lane & 3) + (e & 1);
        const int h = e >> 1;
        sc[nt][e] = key <= pos[h] ? sc[nt][e] * scale : -INFINITY;
        mx[h] = fmaxf(mx[h], sc[nt][e]);
      }
    float corr[2], base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float m_new = fmaxf(m[h], mx[h]);
      // Only a padding row keeps m = -inf (position 0 is every real row's first key): base 0 keeps its p
      // and corr at 0 instead of NaN. For a real row a step of masked keys gives m_new = m: corr = 1.
      base[h] = m_new == -INFINITY ? 0.0f : m_new;
      corr[h] = expf(m[h] - base[h]);
      m[h] = m_new;
      l[h] *= corr[h];
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[nt][e] = expf(sc[nt][e] - base[e >> 1]);
        l[e >> 1] += sc[nt][e];
      }
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= corr[e >> 1];

        // O += P V: P's C fragments of keys 16c .. 16c + 15 are the A fragment of k-step c.
#pragma unroll
    for (int c = 0; c < KB / 16; ++c) {
      const uint32_t pa[4] = {tc::pack_bf16x2(sc[2 * c][0], sc[2 * c][1]), tc::pack_bf16x2(sc[2 * c][2], sc[2 * c][3]),
                              tc::pack_bf16x2(sc[2 * c + 1][0], sc[2 * c + 1][1]),
                              tc::pack_bf16x2(sc[2 * c + 1][2], sc[2 * c + 1][3])};
      // ldmatrix rows: lane l gives key 16c + l % 8 + 8 ((l / 8) % 2) at dims 8 dt + 8 (l / 16).
      const int key = 16 * c + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
      for (int dt = 0; dt < DT; dt += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(v_base + 2u * static_cast<uint32_t>(key * P + 8 * dt + 8 * (lane >> 4)), b0, b1, b2, b3);
        tc::mma_bf16(o[dt], pa, b0, b1);
        tc::mma_bf16(o[dt + 1], pa, b2, b3);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 16 * warp + (lane >> 2) + 8 * (e >> 1);
      if (i < nr) out[(r0 + i) * ldo + int64_t{head} * HD + 8 * dt + 2 * (lane & 3) + (e & 1)] = o[dt][e] / l[e >> 1];
    }
}

// ---- The pipelined kernel (the default for a bf16 cache; the file's header) ----

// ex2.approx of the hardware (one MUFU op, flush-to-zero): the same instruction for every row;
// 2^-inf = +0 exactly.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.L1 [%0];\n" ::"l"(p)); }

// Shared memory in bf16 elements: two steps' keys then values [2][2][KB][P] (cp.async lands step j + 1 in
// one while step j is computed from the other), then q [H2][kRows][P]. P = HD + 8: the 8 rows an ldmatrix
// phase reads sit in distinct banks (a row is 17 or 33 16-byte units: consecutive rows shift by one unit).
template <int HD, int H2>
struct PipelinedLayout {
  static constexpr int KB = PrefillShape<HD>::kStepKeys;
  static constexpr int kPitch = HD + 8;
  static constexpr int kStepElems = 2 * KB * kPitch;  // one step's keys, then its values
  static constexpr int kQ = 2 * kStepElems;
  static constexpr int kElems = kQ + H2 * kRows * kPitch;
};

template <int HD, int H2>
constexpr int pipelined_smem_bytes() {
  return static_cast<int>(sizeof(uint16_t)) * PipelinedLayout<HD, H2>::kElems;
}

// CTAs a multiprocessor should hold: at head dim 128 two (O is 64 registers a thread: the bound of 128
// registers leaves q in shared memory), at 256 one (O alone is 128).
template <int HD>
constexpr int pipelined_min_ctas() {
  return HD == 128 ? 2 : 1;
}

// The pipelined kernel: a bf16 cache's keys and values go by cp.async straight into the bf16 tiles
// (double-buffered, no conversion pass, one barrier a step); q, k and v fragments by ldmatrix; exp2 with
// log2(e) folded into the scale; the mask only in the steps that reach past a row of the warp; the rescale
// of O skipped when every factor of the warp is exactly 1. Grid and rows as attention_prefill_kernel's.
template <int HD, int H2>
__global__ void __launch_bounds__(prefill_threads<H2>(), pipelined_min_ctas<HD>())
    attention_prefill_pipelined_kernel(const KvRow* rows, const int32_t* tiles, void* const* ptrs, Geo geo,
                                       const float* q, int64_t ldq, int num_heads, float scale_log2, float* out,
                                       int64_t ldo) {
  pdl_begin();
  using L = PipelinedLayout<HD, H2>;
  constexpr int P = L::kPitch, KB = L::KB, KS = HD / 16, DT = HD / 8, NT = KB / 8;
  constexpr int kThreads = prefill_threads<H2>();
  extern __shared__ __align__(16) uint16_t smem16[];
  uint16_t* s_q = smem16 + L::kQ;
  const int head0 = static_cast<int>(blockIdx.x) * H2;
  const int kvh = head0 / (num_heads / geo.num_kv_heads);
  const int32_t* tile = tiles + int64_t{blockIdx.y} * kPrefillTileInts;
  const int64_t r0 = tile[0];
  const int nr = tile[1];
  const int n = tile[2] + 1;  // the keys the tile's rows see: positions 0 .. its last row's
  void* const* table = ptrs + rows[r0].table;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const int warp = (tid >> 5) % kRowWarps;  // the warp's rows: 16 warp .. 16 warp + 15
  const int head = head0 + (tid >> 5) / kRowWarps;
  int pos[2];  // this thread's rows lane / 4 and lane / 4 + 8 of the warp's tile; -1 for padding rows
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * warp + (lane >> 2) + 8 * h;
    pos[h] = i < nr ? rows[r0 + i].position : -1;
  }
  // The warp's first row's position: the smallest of its real rows' (-1 when it holds none). A step whose
  // last key is at most this masks nothing.
  const int warp_first = 16 * warp < nr ? rows[r0 + 16 * warp].position : -1;

  // Step j's keys and values (positions KB j ..) by cp.async into buffer j % 2, as stored; zeros past the
  // tile's last position (slots not yet written may hold NaN).
  // A thread copies the same 8 dims d of keys kk0, kk0 + kKeyStride, .. (its offsets in a block fixed).
  constexpr int kPieces = HD / 8, kKeyStride = kThreads / kPieces;
  static_assert(kThreads % kPieces == 0 && KB % kKeyStride == 0);
  const int dim0 = 8 * (tid % kPieces), kk0 = tid / kPieces;
  const int64_t k_off = geo.offset(0, kvh, 0) + dim0, v_off = geo.offset(1, kvh, 0) + dim0;
  const uint32_t s_lane = tc::smem_addr(smem16 + kk0 * P + dim0);
  auto issue = [&](int j) {
    const uint32_t s_kb = s_lane + 2u * static_cast<uint32_t>((j & 1) * L::kStepElems);
    const int t0 = KB * j;
#pragma unroll
    for (int kk = kk0, i = 0; i < KB / kKeyStride; ++i, kk += kKeyStride) {
      const int p = t0 + kk;
      const bool live = p < n;
      // Past the tile's last position: any valid, 16-byte aligned address (block 0), nothing read.
      const KvBf16* blk = static_cast<const KvBf16*>(table[live ? p / kBlockSize : 0]);
      const int64_t slot = live ? p % kBlockSize : 0;
      tc::cp_async_cg(s_kb + 2u * static_cast<uint32_t>(i * kKeyStride * P), blk + k_off + slot * HD, live ? 16 : 0);
      tc::cp_async_cg(s_kb + 2u * static_cast<uint32_t>((KB + i * kKeyStride) * P), blk + v_off + slot * HD,
                      live ? 16 : 0);
    }
    tc::cp_async_commit();
  };
  issue(0);  // its own region: it comes in while q is rounded into shared memory

  for (int e = tid; e < H2 * kRows * (HD / 4); e += kThreads) {
    const int hi = e / (kRows * (HD / 4)), i = e / (HD / 4) % kRows, d = 4 * (e % (HD / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < nr) {
      const float* src = q + (r0 + i) * ldq + int64_t{head0 + hi} * HD + d;
      v = make_float4(src[0], src[1], src[2], src[3]);
    }
    store_bf16x4(s_q + (hi * kRows + i) * P + d, v);
  }

  // ldmatrix row addresses of this lane: q's A tile (rows lane % 16, k-half lane / 16), the keys' B tiles
  // (key lane % 8 + 8 (lane / 16), k-half (lane / 8) % 2; x4 gives two 8-key tiles), the values' (key
  // lane % 8 + 8 ((lane / 8) % 2), dim-half lane / 16, transposed).
  const uint32_t q_lane = tc::smem_addr(s_q + ((head - head0) * kRows + 16 * warp + (lane & 15)) * P + 8 * (lane >> 4));
  const uint32_t k_lane = 2u * static_cast<uint32_t>(((lane & 7) + 8 * (lane >> 4)) * P + 8 * ((lane >> 3) & 1));
  const uint32_t v_lane = 2u * static_cast<uint32_t>((KB + (lane & 7) + 8 * ((lane >> 3) & 1)) * P + 8 * (lane >> 4));
  const uint32_t smem_base = tc::smem_addr(smem16);

  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // this lane's partial l of its key columns
  const int steps = (n + KB - 1) / KB;
  for (int j = 0; j < steps; ++j) {
    tc::cp_async_wait_all();  // step j's copies: the only group in flight
    __syncthreads();          // they landed for every thread (and q, at j = 0); step j - 1's buffer is free
    if (j + 1 < steps) issue(j + 1);
    const int t0 = KB * j;
    // The block table's entries of step j + 2 into L1 (a 128-byte line serves 256 keys), so that issue()
    // finds them there rather than waiting on L2.
    if (tid == 0 && t0 + 2 * KB < n) prefetch_l1(table + (t0 + 2 * KB) / kBlockSize);
    const uint32_t kv_base = smem_base + 2u * static_cast<uint32_t>((j & 1) * L::kStepElems);

    // S = q kᵀ: each score one chain of mma k-steps over the head dim in increasing order.
    float sc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t a[4];
      tc::ldmatrix_x4(q_lane + 32u * ks, a[0], a[1], a[2], a[3]);
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        uint32_t b0, b1, b2, b3;
        tc::ldmatrix_x4(kv_base + k_lane + 2u * (8 * nt * P + 16 * ks), b0, b1, b2, b3);
        tc::mma_bf16(sc[nt], a, b0, b1);
        tc::mma_bf16(sc[nt + 1], a, b2, b3);
      }
    }

    // The online softmax of rows lane / 4 (h = 0) and lane / 4 + 8 (h = 1), in base 2: s = score ·
    // scale · log2(e). A key is masked (-inf) past its row's position; a step whose last key no row of
    // the warp is before gives every key the unmasked value, which is the masked one's for visible keys.
    float mx[2] = {-INFINITY, -INFINITY};
    if (t0 + KB - 1 > warp_first) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = t0 + 8 * nt + 2 * (lane & 3) + (e & 1);
          sc[nt][e] = key <= pos[e >> 1] ? sc[nt][e] * scale_log2 : -INFINITY;
          mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sc[nt][e] *= scale_log2;
          mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
        }
    }
    float corr[2], base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float m_new = fmaxf(m[h], mx[h]);
      // Only a padding row keeps m = -inf: base 0 keeps its p at 0 instead of NaN. An unchanged max
      // (every step of masked keys past a real row's position) gives the factor 1 exactly.
      base[h] = m_new == -INFINITY ? 0.0f : m_new;
      corr[h] = m[h] == m_new ? 1.0f : exp2_approx(m[h] - base[h]);
      m[h] = m_new;
      l[h] *= corr[h];
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[nt][e] = exp2_approx(sc[nt][e] - base[e >> 1]);
        l[e >> 1] += sc[nt][e];
      }
    // O times 1 keeps its bits: skipping it where every factor of the warp is 1 changes none.
    if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[dt][e] *= corr[e >> 1];
    }

    // O += P V: P's C fragments of keys 16c .. 16c + 15 are the A fragment of k-step c.
#pragma unroll
    for (int c = 0; c < KB / 16; ++c) {
      const uint32_t pa[4] = {tc::pack_bf16x2(sc[2 * c][0], sc[2 * c][1]), tc::pack_bf16x2(sc[2 * c][2], sc[2 * c][3]),
                              tc::pack_bf16x2(sc[2 * c + 1][0], sc[2 * c + 1][1]),
                              tc::pack_bf16x2(sc[2 * c + 1][2], sc[2 * c + 1][3])};
#pragma unroll
      for (int dt = 0; dt < DT; dt += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(kv_base + v_lane + 2u * (16 * c * P + 8 * dt), b0, b1, b2, b3);
        tc::mma_bf16(o[dt], pa, b0, b1);
        tc::mma_bf16(o[dt + 1], pa, b2, b3);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 16 * warp + (lane >> 2) + 8 * (e >> 1);
      if (i < nr) out[(r0 + i) * ldo + int64_t{head} * HD + 8 * dt + 2 * (lane & 3) + (e & 1)] = o[dt][e] / l[e >> 1];
    }
}

// Raises the kernel's shared-memory limit, once, before its first launch.
template <int HD, int H2, class KV>
void prefill_smem_attribute() {
  static const bool done = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<HD, H2, KV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    prefill_smem_bytes<HD, H2>()));
    return true;
  }();
  (void)done;
}

template <int HD, int H2>
void launch_pipelined(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq,
                      int num_heads, float scale, float* out, int64_t ldo, cudaStream_t stream) {
  static const bool attribute_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_pipelined_kernel<HD, H2>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, pipelined_smem_bytes<HD, H2>()));
    return true;
  }();
  (void)attribute_set;
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x log2(e))
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t t = 0; t < n_tiles; t += kMaxGridY) {
    const int64_t count = std::min(kMaxGridY, n_tiles - t);
    const dim3 grid(static_cast<unsigned>(num_heads / H2), static_cast<unsigned>(count));
    launch_pdl(attention_prefill_pipelined_kernel<HD, H2>, grid, prefill_threads<H2>(),
               static_cast<size_t>(pipelined_smem_bytes<HD, H2>()), stream, kv.rows, tiles + t * kPrefillTileInts,
               kv.ptrs, geo_of(kv), q, ldq, num_heads, scale_log2, out, ldo);
    CUDA_CHECK_LAUNCH();
  }
}

template <int HD, int H2, class KV>
void launch_prefill(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq, int num_heads,
                    float scale, float* out, int64_t ldo, cudaStream_t stream) {
  if constexpr (std::is_same_v<KV, KvBf16>) {
    if (prefill_kernel() == PrefillKernel::Pipelined) {
      launch_pipelined<HD, H2>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
      return;
    }
  }
  prefill_smem_attribute<HD, H2, KV>();
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t t = 0; t < n_tiles; t += kMaxGridY) {
    const int64_t count = std::min(kMaxGridY, n_tiles - t);
    const dim3 grid(static_cast<unsigned>(num_heads / H2), static_cast<unsigned>(count));
    launch_pdl(attention_prefill_kernel<HD, H2, KV>, grid, prefill_threads<H2>(),
               static_cast<size_t>(prefill_smem_bytes<HD, H2>()), stream, kv.rows, tiles + t * kPrefillTileInts,
               kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, out, ldo);
    CUDA_CHECK_LAUNCH();
  }
}

template <int HD, class KV>
void launch_prefill(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq, int num_heads,
                    float scale, float* out, int64_t ldo, cudaStream_t stream) {
  if (prefill_heads_per_cta(num_heads / kv.num_kv_heads) == 2)
    launch_prefill<HD, 2, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
  else
    launch_prefill<HD, 1, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
}

template <class KV>
void launch_prefill_kv(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq,
                       int num_heads, float scale, float* out, int64_t ldo, cudaStream_t stream) {
  if (kv.head_dim == 128)
    launch_prefill<128, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
  else
    launch_prefill<256, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
}

}  // namespace

bool attention_prefill_supports(int head_dim) { return head_dim == 128 || head_dim == 256; }

void set_prefill_heads(PrefillHeads h) { g_heads.store(static_cast<int>(h), std::memory_order_relaxed); }
PrefillHeads prefill_heads() { return static_cast<PrefillHeads>(g_heads.load(std::memory_order_relaxed)); }
void set_prefill_kernel(PrefillKernel k) { g_kernel.store(static_cast<int>(k), std::memory_order_relaxed); }
PrefillKernel prefill_kernel() { return static_cast<PrefillKernel>(g_kernel.load(std::memory_order_relaxed)); }
int prefill_heads_per_cta(int group) {
  if (group % 2 != 0) return 1;
  return prefill_heads() == PrefillHeads::One ? 1 : 2;
}

AttentionPrefillPlan attention_prefill_plan(const KvArgs& kv) {
  struct Tile {
    int32_t first, rows, last;
  };
  std::vector<Tile> tiles;
  for (int64_t r = 0; r < kv.R; ++r) {
    const KvRow& row = kv.host_rows[r];
    if (!tiles.empty()) {
      Tile& t = tiles.back();
      const KvRow& prev = kv.host_rows[r - 1];
      if (t.rows < kPrefillTileRows && row.table == prev.table && row.position == prev.position + 1) {
        ++t.rows;
        t.last = row.position;
        continue;
      }
    }
    tiles.push_back({static_cast<int32_t>(r), 1, row.position});
  }
  // The tiles with the most keys first, so that the short ones fill the last wave.
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) { return a.last > b.last; });
  AttentionPrefillPlan pl;
  pl.tiles.reserve(tiles.size() * kPrefillTileInts);
  for (const Tile& t : tiles) pl.tiles.insert(pl.tiles.end(), {t.first, t.rows, t.last});
  return pl;
}

void attention_prefill(const KvArgs& kv, const AttentionPrefillPlan& plan, const float* q, int64_t ldq, int num_heads,
                       float scale, float* out, int64_t ldo, cudaStream_t stream) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t n_tiles = plan.num_tiles();
  if (n_tiles == 0) return;
  // Read by the kernels enqueued next: the caller holds the staging lock (as for kv.rows).
  const auto* d_tiles =
      static_cast<const int32_t*>(Staging::global().stage(plan.tiles.data(), plan.tiles.size() * sizeof(int32_t)));
  if (kv.bf16)
    launch_prefill_kv<KvBf16>(kv, d_tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
  else
    launch_prefill_kv<float>(kv, d_tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream);
}

uint64_t attention_prefill_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace specserve::cuda::kernels
