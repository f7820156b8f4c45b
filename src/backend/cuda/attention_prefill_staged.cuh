#pragma once
// Internal to attention_prefill.cu (included there only): the staged prefill attention kernel (f32 caches,
// or a bf16 cache by the set_prefill_kernel switch). The rule and the argument: attention_prefill.cu's header.
#include "backend/cuda/attention_prefill_common.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

// (tiles[kPrefillTileInts * y ..]: first row, rows, the last row's position). The arithmetic and why it
// keeps the rule: the file's header.
template <int HD, int H2, class KV>
__global__ void __launch_bounds__(prefill_threads<H2>())
    attention_prefill_kernel(const KvRow* rows, const int32_t* tiles, void* const* ptrs, Geo geo, const float* q,
                             int64_t ldq, int num_heads, float scale, float* out, int64_t ldo, OutGate gate) {
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

  round_q_rows<HD, H2, P, kThreads>(q, ldq, r0, nr, head0, s_q, tid);
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
    tc_expf_softmax_pv<KB, DT, P>(sc, mx, v_base, lane, o, m, l);
  }
  write_rows<HD>(o, l, out, ldo, r0, nr, head, warp, lane, gate, XbOut{}, 0, num_heads);
}

}  // namespace
}  // namespace specserve::cuda::kernels
