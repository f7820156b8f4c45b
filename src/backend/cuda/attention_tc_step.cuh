#pragma once
// One key step of the tensor-core flash attention, shared by the pipelined prefill kernel
// (attention_prefill_pipelined.cuh) and the split kernel of decode and verify rows (attention_split_tc.cu)
// (and, in natural base, the rest of the step for the free-order and staged kernels: tc_expf_softmax_pv):
// a warp's 16 query rows against the step's KB keys and values, staged as bf16 rows of pitch P in shared
// memory. The arguments for why a row's bits depend on its own inputs only are in the two kernels' files;
// this function is the arithmetic they argue about, written once.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_tc_fragments.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"

namespace specserve::cuda::kernels {

// This lane's ldmatrix addresses for tc_flash_step: q's A tile (row lane % 16 of the warp's 16 rows starting
// at q_rows, k-half lane / 16) as a shared-memory address; the keys' B tiles (key lane % 8 + 8 (lane / 16),
// k-half (lane / 8) % 2; x4 gives two 8-key tiles) and the values' (key lane % 8 + 8 ((lane / 8) % 2),
// dim-half lane / 16, read transposed) as byte offsets from a step's keys-then-values tile of pitch P.
struct TcLaneAddrs {
  uint32_t q, k, v;
};
template <int KB, int P>
__device__ __forceinline__ TcLaneAddrs tc_lane_addrs(const uint16_t* q_rows, int lane) {
  return {tc::smem_addr(q_rows + (lane & 15) * P + 8 * (lane >> 4)),
          2u * static_cast<uint32_t>(((lane & 7) + 8 * (lane >> 4)) * P + 8 * ((lane >> 3) & 1)),
          2u * static_cast<uint32_t>((KB + (lane & 7) + 8 * ((lane >> 3) & 1)) * P + 8 * (lane >> 4))};
}

// The online softmax of one key step over a warp's score tile sc (C fragments of NT 8-key tiles: sc[nt][e]
// is key t0 + 8 nt + 2 (lane % 4) + e % 2 of row lane / 4 + 8 (e / 2)), shared by tc_flash_step and the wgmma
// prefill kernel (attention_prefill_wgmma_sm90a.cu: an m64n64 accumulator has the same layout per warp).
// Scores become p = 2^(s - m_new) in place; m and l (this lane's partial row sums) advance; corr holds each
// row's rescale factor for O. Returns whether some factor of the warp is not 1 (O must then be rescaled:
// skipping it where every factor is 1 changes no bits).
// FusedScale (the wgmma prefill kernel): the scale folded into the exponent's argument, p = 2^fma(s, c, -m_new)
// with one rounding (c = scale_log2), the row maximum taken over the raw scores and scaled once (rounding is
// monotone and c > 0, so fl(c · max s) = max fl(c · s)): one instruction fewer a score, other bits.
template <int NT, bool FusedScale = false>
__device__ __forceinline__ bool tc_online_softmax(float (&sc)[NT][4], int t0, bool mask, const int (&pos)[2], int lane,
                                                  float scale_log2, float (&m)[2], float (&l)[2], float (&corr)[2]) {
  // The online softmax of rows lane / 4 (h = 0) and lane / 4 + 8 (h = 1), in base 2: s = score ·
  // scale · log2(e). A key is masked (-inf) past its row's position; a step whose last key no row of
  // the warp is before gives every key the unmasked value, which is the masked one's for visible keys.
  float mx[2] = {-INFINITY, -INFINITY};
  if (mask) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = t0 + 8 * nt + 2 * (lane & 3) + (e & 1);
        sc[nt][e] = key <= pos[e >> 1] ? (FusedScale ? sc[nt][e] : sc[nt][e] * scale_log2) : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (!FusedScale) sc[nt][e] *= scale_log2;
        mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
      }
  }
  float base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m[h], FusedScale ? mx[h] * scale_log2 : mx[h]);
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
      if constexpr (FusedScale)
        sc[nt][e] = exp2_approx(fmaf(sc[nt][e], scale_log2, -base[e >> 1]));
      else
        sc[nt][e] = exp2_approx(sc[nt][e] - base[e >> 1]);
      l[e >> 1] += sc[nt][e];
    }
  return __any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f);
}

// P rounded to bf16 as the A fragment of k-step c (keys 16c .. 16c + 15): the C fragments of 8-key tiles 2c
// and 2c + 1 (the m16n8k16 A layout; wgmma's register A of m64nNk16 is the same per warp).
template <int NT>
__device__ __forceinline__ void tc_p_fragment(const float (&sc)[NT][4], int c, uint32_t (&pa)[4]) {
  pa[0] = tc::pack_bf16x2(sc[2 * c][0], sc[2 * c][1]);
  pa[1] = tc::pack_bf16x2(sc[2 * c][2], sc[2 * c][3]);
  pa[2] = tc::pack_bf16x2(sc[2 * c + 1][0], sc[2 * c + 1][1]);
  pa[3] = tc::pack_bf16x2(sc[2 * c + 1][2], sc[2 * c + 1][3]);
}

// q_lane, k_lane, v_lane: this lane's ldmatrix addresses (tc_lane_addrs) (q's A tile; the keys' and the values' offsets
// from kv_base, the step's keys then values). t0: the step's first key, in the positions pos[] are given in (pos: this
// lane's rows lane / 4 and lane / 4 + 8; -1 for a padding row). mask: whether some key of the step may lie past a row
// of the warp (false only when every key is visible to every real row). Scores are scaled by scale_log2 = scale ·
// log2(e) and exponentiated in base 2; o, m and l (this lane's partial sum over its key columns) carry the online
// softmax from step to step.
template <int HD, int KB, int P>
__device__ __forceinline__ void tc_flash_step(uint32_t q_lane, uint32_t kv_base, uint32_t k_lane, uint32_t v_lane,
                                              int t0, bool mask, const int (&pos)[2], int lane, float scale_log2,
                                              float (&o)[HD / 8][4], float (&m)[2], float (&l)[2]) {
  constexpr int KS = HD / 16, DT = HD / 8, NT = KB / 8;
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

  float corr[2];
  // O times 1 keeps its bits: skipping it where every factor of the warp is 1 changes none.
  if (tc_online_softmax<NT>(sc, t0, mask, pos, lane, scale_log2, m, l, corr)) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= corr[e >> 1];
  }

  // O += P V: P's C fragments of keys 16c .. 16c + 15 are the A fragment of k-step c.
#pragma unroll
  for (int c = 0; c < KB / 16; ++c) {
    uint32_t pa[4];
    tc_p_fragment(sc, c, pa);
#pragma unroll
    for (int dt = 0; dt < DT; dt += 2) {
      uint32_t b0, b1, b2, b3;
      ldmatrix_x4_trans(kv_base + v_lane + 2u * (16 * c * P + 8 * dt), b0, b1, b2, b3);
      tc::mma_bf16(o[dt], pa, b0, b1);
      tc::mma_bf16(o[dt + 1], pa, b2, b3);
    }
  }
}

// The rest of a key step in natural base (expf), for the two kernels that exponentiate so (the drafter's
// free-order kernel, attention_free.cu, and the staged prefill kernel, attention_prefill_staged.cuh), from
// the step's masked and scaled scores sc and this lane's maxima mx of them: each row's maximum over its quad
// of lanes, p = e^(s - m_new) in place, m and l advanced, O rescaled (always) and O += P V with V's 16-key
// k-steps read transposed from v_base (KB keys of pitch P elements).
template <int KB, int DT, int P>
__device__ __forceinline__ void tc_expf_softmax_pv(float (&sc)[KB / 8][4], float (&mx)[2], uint32_t v_base, int lane,
                                                   float (&o)[DT][4], float (&m)[2], float (&l)[2]) {
  constexpr int NT = KB / 8;
  float corr[2], base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m[h], mx[h]);
    // A row that has seen no key yet keeps m = -inf (in the prefill kernel only a padding row: position 0
    // is every real row's first key): base 0 keeps its p and corr at 0 instead of NaN (-inf - -inf).
    base[h] = m_new == -INFINITY ? 0.0f : m_new;
    corr[h] = expf(m[h] - base[h]);  // 0 while m was -inf
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
    uint32_t pa[4];
    tc_p_fragment(sc, c, pa);
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

}  // namespace specserve::cuda::kernels
