#pragma once
// Internal to attention_prefill.cu (included there only): the pipelined prefill attention kernel (the default
// for a bf16 cache). The rule and the argument: attention_prefill.cu's header.
#include "backend/cuda/attention_prefill_common.cuh"
#include "backend/cuda/attention_tc_step.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

// ---- The pipelined kernel (the default for a bf16 cache; the file's header) ----

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
// of O skipped when every factor of the warp is exactly 1. Grid and rows as attention_prefill_kernel's. With
// xb.regs it also writes out's bf16 copy for the o projection (write_rows_xb; R: the call's rows).
template <int HD, int H2>
__global__ void __launch_bounds__(prefill_threads<H2>(), pipelined_min_ctas<HD>())
    attention_prefill_pipelined_kernel(const KvRow* rows, const int32_t* tiles, void* const* ptrs, Geo geo,
                                       const float* q, int64_t ldq, int num_heads, float scale_log2, float* out,
                                       int64_t ldo, int64_t R, XbOut xb, OutGate gate) {
  pdl_begin();
  using L = PipelinedLayout<HD, H2>;
  constexpr int P = L::kPitch, KB = L::KB, DT = HD / 8;
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

  round_q_rows<HD, H2, P, kThreads>(q, ldq, r0, nr, head0, s_q, tid);

  const TcLaneAddrs lane_addrs = tc_lane_addrs<KB, P>(s_q + ((head - head0) * kRows + 16 * warp) * P, lane);
  const uint32_t q_lane = lane_addrs.q, k_lane = lane_addrs.k, v_lane = lane_addrs.v;
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

    tc_flash_step<HD, KB, P>(q_lane, kv_base, k_lane, v_lane, t0, t0 + KB - 1 > warp_first, pos, lane, scale_log2, o, m,
                             l);
  }
  write_rows<HD>(o, l, out, ldo, r0, nr, head, warp, lane, gate, xb, R, num_heads);
}

}  // namespace
}  // namespace specserve::cuda::kernels
