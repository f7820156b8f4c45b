// The wgmma prefill attention (PrefillKernel::Wgmma, the default on Hopper for a bf16 cache; sm_90a only):
// flash attention over a prompt's rows on the warpgroup tensor-core instructions. It keeps THE RULE of
// attention_prefill.cu (a row's bits depend only on its own query, its sequence's keys and values at
// positions 0 .. its own, the head dim and the scale), by the same argument, with these differences of
// arithmetic from the pipelined kernel (so different bits, as the rule allows):
// - S = q kᵀ of a warpgroup's 64 rows and a step's KB keys is one wgmma.m64n{KB}k16 chain over the head dim
//   in increasing 16-wide k-steps from +0, and O += P V one wgmma.m64n{HD}k16 per 16 keys in increasing
//   order (P from registers). A wgmma computes each output row from that row of A alone (as the prefill
//   GEMM relies on: matmul_prefill_sm90a.cu), so a row's scores and sums do not depend on its neighbours.
// - The key step is KB keys (128 at head dim 128, 64 at 256), at absolute positions [KB j, KB j + KB) from 0:
//   the masked-step argument of attention_prefill.cu holds word for word (values past the tile's last
//   position are loaded as zeros). The online softmax is the pipelined kernel's (tc_online_softmax) with the scale
//   folded into the exponent's argument: p = 2^fma(s, c, -m), one rounding (its FusedScale form).
// - At head dim 128 a consumer runs its steps as a software pipeline: step j's S is issued, then step j - 1's
//   O += P V, and step j's softmax runs while that O += P V is on the tensor cores; O is rescaled by step j's
//   correction once step j - 1's sum has landed. O sees the serial loop's operations in the serial order, so
//   the pipeline does not change a bit. At head dim 256 (two stages, which a pipelined consumer would both
//   hold) the steps run serially.
//
// Shape. A CTA serves one query tile (attention_prefill_plan: up to 64 rows of one sequence) and H2 query
// heads of one KV head: warpgroup 0 is the producer, warpgroup 1 + h the consumer of head head0 + h (its
// warp w holds rows 16 w .. 16 w + 15 as its part of the m64 tile, the layout write_rows expects). The
// producer's 128 threads copy each step's keys and values by cp.async (the cache is paged: 16 positions a
// block, so there is no tensor to give TMA) into a stage of kStages, in wgmma's K-major 128-byte-swizzle
// image (tile_off: a row of 64 dims is 128 bytes, piece k8 at k8 ^ (row % 8); the head dim in slabs of 64).
// The keys are read K-major as S's B operand; the values, in the same image, MN-major as O's B operand
// (smem_desc_mn: 64 dims a 128-byte row, keys the k dimension). A stage is handed over by mbarriers:
// `full` when the producer's copies have landed (each producer thread's cp.async.mbarrier.arrive.noinc: the copies'
// completion is the thread's arrival, so the producer never waits for its copies and a step is handed over as soon
// as it lands, not after the next step's copies are issued; each consumer thread fences the async proxy after its
// wait, before its wgmma read the stage), `empty` when every consumer warp's wgmma on it are done.
//
// Registers: a consumer thread holds O (HD / 2 f32), S (KB / 2 f32) and, pipelined (head dim 128), the previous
// step's P (KB / 4 bf16 pairs; the serial loop packs P a 16-key chunk at a time); the producer gives its registers
// up (setmaxnreg) so that two consumer warpgroups get 232 each.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/attention_prefill_common.cuh"
#include "backend/cuda/attention_tc_step.cuh"
#include "backend/cuda/attention_wgmma_ptx.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_wgmma.cuh"
#include "backend/cuda/matmul_wgmma_ptx.cuh"
#include "backend/cuda/matmul_wgmma_tma_ptx.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::wg;

constexpr int kTurnBarrier = 3;  // the consumers' turn barriers 3 and 4 (ids 1 and 2: their q-image barriers)

template <int HD, int H2>
struct WgAttn {
  // Key steps of 128 keys at head dim 128 (three stages of 64 KB beside 32 KB of q), of 64 at head dim 256
  // (two stages of 64 KB beside 64 KB of q; S and P of 128 keys would not fit beside its O in registers).
  static constexpr int kKB = HD == 128 ? 128 : 64, kStages = HD == 128 ? 3 : 2;
  static constexpr bool kPipelined = kStages >= 3;  // the consumers' software pipeline (below) needs a third stage
  // Two pipelined consumers take turns issuing their tensor-core work (named barriers kTurnBarrier + h), so that one's
  // softmax runs while the other's wgmma occupy the tensor cores rather than both softmaxes at once.
  static constexpr bool kPingPong = kPipelined && H2 == 2;
  static constexpr int kThreads = 128 * (H2 + 1);
  static constexpr int kSlabs = HD / 64;                                     // 64-dim slabs of a row
  static constexpr int kQHeadBytes = kRows * HD * 2;                         // one head's 64 query rows
  static constexpr int kSlabBytes = kKB * 128;                               // one slab of a step's keys (or values)
  static constexpr int kTileBytes = kSlabs * kSlabBytes;                     // a step's keys (or values)
  static constexpr int kStageBytes = 2 * kTileBytes;                         // keys, then values
  static constexpr int kStage0 = H2 * kQHeadBytes;                           // q first
  static constexpr int kSmemBytes = kStage0 + kStages * kStageBytes + 1024;  // + the swizzle's alignment
  static constexpr int kProducerRegs = 40, kConsumerRegs = H2 == 2 ? 232 : 240;
};
static_assert(kRows == 64, "a consumer warpgroup's m64 tile is the plan's query tile");

// The rows of one head's q tile into its shared-memory image (bf16, K-major, swizzled): thread ctid of the
// consumer warpgroup converts 16-byte pieces ctid, ctid + 128, ..; rows past nr are zeros.
template <int HD>
__device__ __forceinline__ void load_q(uint32_t s_q, const float* q, int64_t ldq, int64_t r0, int nr, int head,
                                       int ctid) {
  constexpr int kPieces = HD / 8;
  for (int e = ctid; e < kRows * kPieces; e += 128) {
    const int r = e / kPieces, g = e % kPieces;
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    if (r < nr) {
      const float* src = q + (r0 + r) * ldq + int64_t{head} * HD + 8 * g;
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = tc::pack_bf16x2(src[2 * i], src[2 * i + 1]);
    }
    const uint32_t dst = s_q + (g / 8) * (kRows * 128) + tile_off(r, g % 8);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  }
}

template <int HD, int H2>
__global__ void __launch_bounds__(WgAttn<HD, H2>::kThreads, 1)
    attention_prefill_wgmma_kernel(const KvRow* rows, const int32_t* tiles, void* const* ptrs, Geo geo, const float* q,
                                   int64_t ldq, int num_heads, float scale_log2, float* out, int64_t ldo, int64_t R,
                                   XbOut xb, OutGate gate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using W = WgAttn<HD, H2>;
  constexpr int KB = W::kKB, S = W::kStages, NT = KB / 8, DT = HD / 8;
  pdl_begin();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * S];  // full[0..S), then empty[0..S)
  const uint32_t pad = (1024u - (tc::smem_addr(smem_raw) & 1023u)) & 1023u;
  const uint32_t sbase = tc::smem_addr(smem_raw) + pad;
  const uint32_t full0 = tc::smem_addr(&bars[0]), empty0 = tc::smem_addr(&bars[S]);
  const int tid = static_cast<int>(threadIdx.x);
  // full: every producer thread, once its copies landed; empty: every consumer warp
  init_ring_barriers(tid, full0, empty0, S, 128, 4 * H2);
  __syncthreads();

  const int head0 = static_cast<int>(blockIdx.x) * H2;
  const int kvh = head0 / (num_heads / geo.num_kv_heads);
  const int32_t* tile = tiles + int64_t{blockIdx.y} * kPrefillTileInts;
  const int64_t r0 = tile[0];
  const int nr = tile[1];
  const int n = tile[2] + 1;  // the keys the tile's rows see: positions 0 .. its last row's
  const int steps = (n + KB - 1) / KB;
  void* const* table = ptrs + rows[r0].table;
  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);

  if (warpgroup == 0) {
    // ---- producer: step j's keys and values into stage j % S; zeros past the tile's last position ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(W::kProducerRegs));
    constexpr int kPieces = HD / 8, kKeysPerPass = 128 / kPieces;
    static_assert(KB % kBlockSize == 0 && kBlockSize % kKeysPerPass == 0, "a step is whole blocks, a pass whole keys");
    const int g = tid % kPieces, k0 = tid / kPieces;
    const int64_t k_off = geo.offset(0, kvh, 0) + 8 * g, v_off = geo.offset(1, kvh, 0) + 8 * g;
    for (int j = 0; j < steps; ++j) {
      const int s = j % S;
      if (j >= S) mbar_wait(empty0 + 8 * s, static_cast<uint32_t>((j / S - 1) & 1));
      const uint32_t k_tile = sbase + W::kStage0 + s * W::kStageBytes, v_tile = k_tile + W::kTileBytes;
      // A step's keys are KB / kBlockSize whole cache blocks (KB j is a multiple of kBlockSize): one block-table load a
      // block, then this thread's kBlockSize / kKeysPerPass keys of it (slots k0, k0 + kKeysPerPass, ..).
#pragma unroll 2
      for (int b = 0; b < KB / kBlockSize; ++b) {
        const int p0 = KB * j + kBlockSize * b;  // the block's first position
        // Past the tile's last position: any valid, 16-byte aligned address (block 0), nothing read.
        const KvBf16* blk = static_cast<const KvBf16*>(table[p0 < n ? p0 / kBlockSize : 0]);
        const KvBf16 *kb = blk + k_off, *vb = blk + v_off;
#pragma unroll
        for (int h = 0; h < kBlockSize / kKeysPerPass; ++h) {
          const int slot = k0 + kKeysPerPass * h, kk = kBlockSize * b + slot;
          const bool live = p0 + slot < n;
          const uint32_t off = (g / 8) * W::kSlabBytes + tile_off(kk, g % 8);
          tc::cp_async_cg(k_tile + off, kb + (live ? slot * HD : 0), live ? 16 : 0);
          tc::cp_async_cg(v_tile + off, vb + (live ? slot * HD : 0), live ? 16 : 0);
        }
      }
      // The stage is handed over when this thread's copies have landed, without waiting for them here: the
      // arrival on `full` is made by the copies' completion (the consumers fence it to the async proxy).
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full0 + 8 * s) : "memory");
    }
    tc::cp_async_commit();
    tc::cp_async_wait<0>();
    return;
  }

  // ---- consumers: warpgroup 1 + h serves query head head0 + h ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(W::kConsumerRegs));
  const int h = warpgroup - 1, ctid = tid - 128 * warpgroup, warp = ctid >> 5, lane = ctid & 31;
  const int head = head0 + h;
  const uint32_t s_q = sbase + h * W::kQHeadBytes;
  load_q<HD>(s_q, q, ldq, r0, nr, head, ctid);
  fence_proxy_async();
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + h) : "memory");  // the warpgroup's q image is complete

  int pos[2];  // this thread's rows lane / 4 and lane / 4 + 8 of the warp's 16; -1 for padding rows
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int i = 16 * warp + (lane >> 2) + 8 * e;
    pos[e] = i < nr ? rows[r0 + i].position : -1;
  }
  const int warp_first = 16 * warp < nr ? rows[r0 + 16 * warp].position : -1;

  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float(&o_acc)[HD / 2] = reinterpret_cast<float(&)[HD / 2]>(o);
  float sc[NT][4];
  float(&s_acc)[4 * NT] = reinterpret_cast<float(&)[4 * NT]>(sc);
  uint32_t pa[KB / 16][4];  // the previous step's P, the A fragments of its O += P V

  // S = q kᵀ of step j (its stage landed), issued as one group.
  auto issue_scores = [&](int j) {
    const int s = j % S;
    mbar_wait(full0 + 8 * s, static_cast<uint32_t>((j / S) & 1));
    fence_proxy_async();  // the producer's cp.async writes (generic proxy) before this warpgroup's wgmma read them
    const uint32_t k_tile = sbase + W::kStage0 + s * W::kStageBytes;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const uint32_t in_slab = kChunkStep * (kk % 4);  // the k-step's 32 bytes in its slab's rows
      const uint64_t qd = smem_desc(s_q + (kk / 4) * (kRows * 128) + in_slab);
      const uint64_t kd = smem_desc(k_tile + (kk / 4) * W::kSlabBytes + in_slab);
      if constexpr (KB == 128)
        wgmma_m64n128k16(s_acc, qd, kd);
      else
        wgt::wgmma_m64n64k16(s_acc, qd, kd);
    }
    wgmma_commit();
  };
  // One 16-key chunk's O += P V of step j with P's A fragments pf (keys 16c .. 16c + 15 of the step's value tile: two
  // 8-row atoms, 1024 bytes apart, the head dim's slabs kSlabBytes apart).
  auto pv_chunk = [&](int j, int c, const uint32_t(&pf)[4]) {
    const uint32_t v_tile = sbase + W::kStage0 + (j % S) * W::kStageBytes + W::kTileBytes;
    const uint64_t vd = smem_desc_mn(v_tile + 16 * 128 * c, W::kSlabBytes, 1024);
    if constexpr (HD == 256)
      wgmma_m64n256k16_rs_tb(o_acc, pf, vd);
    else
      wgmma_m64n128k16_rs_tb(o_acc, pf, vd);
  };
  // O += P V of step j, issued as one group: P from pa (packed true: the pipelined loop packed it ahead) or packed
  // from the scores chunk by chunk, each just before its wgmma (the serial loop, which holds no KB / 4 registers of P).
  auto issue_pv = [&](int j, auto packed) {
#pragma unroll
    for (int c = 0; c < KB / 16; ++c) {
      if constexpr (decltype(packed)::value) {
        pv_chunk(j, c, pa[c]);
      } else {
        uint32_t p_now[4];
        tc_p_fragment(sc, c, p_now);
        pv_chunk(j, c, p_now);
      }
    }
    wgmma_commit();
  };
  // Step j's online softmax on its landed scores: whether O takes the correction corr.
  auto softmax_step = [&](int j, float(&corr)[2]) {
    const int t0 = KB * j;
    return tc_online_softmax<NT, true>(sc, t0, t0 + KB - 1 > warp_first, pos, lane, scale_log2, m, l, corr);
  };
  auto rescale = [&](const float(&corr)[2]) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= corr[e >> 1];
  };
  // O rescaled and step j's P packed into pa (step j - 1's O += P V has completed: its P and O are free).
  auto rescale_and_pack = [&](bool rescale_o, const float(&corr)[2]) {
    if (rescale_o) rescale(corr);
#pragma unroll
    for (int c = 0; c < KB / 16; ++c) tc_p_fragment(sc, c, pa[c]);
  };
  auto release = [&](int j) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty0 + 8 * (j % S));
  };

  // The consumers' turns (kPingPong): consumer h waits for its turn before it issues a step's wgmma and hands the turn
  // to the other after issuing them; consumer 1 hands consumer 0 the first turn, and consumer 0 takes consumer 1's
  // last hand-over after its own last group (steps + 2 arrivals and waits on barrier 0, steps + 1 on barrier 1).
  // Timing only: no operand or order of any wgmma changes.
  auto turn_wait = [&] {
    if constexpr (W::kPingPong) asm volatile("bar.sync %0, 256;\n" ::"r"(kTurnBarrier + h) : "memory");
  };
  auto turn_pass = [&] {
    if constexpr (W::kPingPong) asm volatile("bar.arrive %0, 256;\n" ::"r"(kTurnBarrier + 1 - h) : "memory");
  };

  if constexpr (W::kPipelined) {
    // The steps in a software pipeline: step j's scores are computed and exponentiated while step j - 1's
    // O += P V runs. O sees the operations of the serial order (rescale by step j's correction, then add
    // step j's P V) in that order, so the bits are the serial loop's.
    if constexpr (W::kPingPong) {
      if (h == 1) asm volatile("bar.arrive %0, 256;\n" ::"r"(kTurnBarrier) : "memory");
    }
    {
      float corr[2];
      turn_wait();
      issue_scores(0);
      turn_pass();
      wgmma_wait<0>();
      rescale_and_pack(softmax_step(0, corr), corr);
    }
    for (int j = 1; j < steps; ++j) {
      turn_wait();
      issue_scores(j);
      issue_pv(j - 1, std::true_type{});
      turn_pass();
      wgmma_wait<1>();  // step j's scores (committed first)
      float corr[2];
      const bool rescale_o = softmax_step(j, corr);
      wgmma_wait<0>();  // step j - 1's O += P V
      release(j - 1);
      rescale_and_pack(rescale_o, corr);
    }
    wgmma_fence();
    turn_wait();
    issue_pv(steps - 1, std::true_type{});
    turn_pass();
    if (h == 0) turn_wait();  // consumer 1's last hand-over: both barriers end with every arrival met
    wgmma_wait<0>();
    release(steps - 1);
  } else {
    // Serially (two stages: a pipelined consumer would hold both, and the producer could not load ahead).
    for (int j = 0; j < steps; ++j) {
      float corr[2];
      issue_scores(j);
      wgmma_wait<0>();
      if (softmax_step(j, corr)) rescale(corr);
      wgmma_fence();
      issue_pv(j, std::false_type{});
      wgmma_wait<0>();
      release(j);
    }
  }
  write_rows<HD>(o, l, out, ldo, r0, nr, head, warp, lane, gate, xb, R, num_heads);
#endif
}

template <int HD, int H2>
void launch_wgmma(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq, int num_heads,
                  float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb, const OutGate& gate) {
  using W = WgAttn<HD, H2>;
  static const bool attribute_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_wgmma_kernel<HD, H2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    W::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x log2(e))
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t t = 0; t < n_tiles; t += kMaxGridY) {
    const int64_t count = std::min(kMaxGridY, n_tiles - t);
    const dim3 grid(static_cast<unsigned>(num_heads / H2), static_cast<unsigned>(count));
    launch_pdl(attention_prefill_wgmma_kernel<HD, H2>, grid, W::kThreads, static_cast<size_t>(W::kSmemBytes), stream,
               kv.rows, tiles + t * kPrefillTileInts, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale_log2, out, ldo,
               kv.R, xb, gate);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

bool attention_prefill_wgmma(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq,
                             int num_heads, int heads_per_cta, float scale, float* out, int64_t ldo,
                             cudaStream_t stream, const XbOut& xb, const OutGate& gate) {
  if (!kv.bf16 || !wgmma_available() || (kv.head_dim != 128 && kv.head_dim != 256)) return false;
  const bool two = heads_per_cta == 2;
  if (kv.head_dim == 256) {
    (two ? launch_wgmma<256, 2> : launch_wgmma<256, 1>)(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream,
                                                        xb, gate);
  } else {
    (two ? launch_wgmma<128, 2> : launch_wgmma<128, 1>)(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream,
                                                        xb, gate);
  }
  return true;
}

}  // namespace specserve::cuda::kernels
