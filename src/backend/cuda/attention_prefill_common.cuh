#pragma once
// Internal to attention_prefill.cu (included there only): what the two prefill attention kernels share —
// the CTA shape, the per-head-dim key step, the staged kernel's shared-memory layout and the fragment
// helpers. The rule they keep and the argument are in attention_prefill.cu's header.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/attention_tc_fragments.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/xb_out.cuh"

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

// Per head dim: the keys of one step and whether q's A fragments stay in registers for the whole key loop
// (head dim 256 keeps them in shared memory and takes 32-key steps: O alone is 128 registers a thread).
template <int HD>
struct PrefillShape;
template <>
struct PrefillShape<128> {
  static constexpr int kStepKeys = tc_step_keys<128>();
  static constexpr bool kQInRegs = true;
};
template <>
struct PrefillShape<256> {
  static constexpr int kStepKeys = tc_step_keys<256>();
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

// The CTA's query rows rounded to bf16 into shared memory, s_q [H2][kRows][P]: rows r0 .. r0 + nr - 1 of q (pitch
// ldq) at query heads head0 .. head0 + H2 - 1, zeros for the tile's rows at or past nr; thread tid of kThreads.
template <int HD, int H2, int P, int kThreads>
__device__ __forceinline__ void round_q_rows(const float* q, int64_t ldq, int64_t r0, int nr, int head0, uint16_t* s_q,
                                             int tid) {
  for (int e = tid; e < H2 * kRows * (HD / 4); e += kThreads) {
    const int hi = e / (kRows * (HD / 4)), i = e / (HD / 4) % kRows, d = 4 * (e % (HD / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < nr) {
      const float* src = q + (r0 + i) * ldq + int64_t{head0 + hi} * HD + d;
      v = make_float4(src[0], src[1], src[2], src[3]);
    }
    store_bf16x4(s_q + (hi * kRows + i) * P + d, v);
  }
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

// The end of every prefill kernel: the row sums of the quad's lanes joined, then for the warp's rows below nr
// (rows r0 + 16 warp .. of the tile) at query head `head`: out = O / l, times d_sigmoid(gate) where gate.g is
// set (Qwen3.5's output gate: the bits of mul_sigmoid applied to the stored quotient), and with xb.regs the
// o projection's bf16 copy of those values (kernels.h: XbOut; each register the pack_bf16x2 of the two f32
// values stored, so the matmul reading it gets the bits of its own conversion). The last head's warps also
// zero their rows' registers past the heads (width num_heads · HD up to the pitch), and the CTA whose tile
// holds the call's last row (r0 + nr == R) zeroes the padding rows [R, xb.rows) of its heads' columns
// (xb_out.cuh).
template <int HD, int DT = HD / 8>
__device__ __forceinline__ void write_rows(const float (&o)[DT][4], float (&l)[2], float* out, int64_t ldo, int64_t r0,
                                           int nr, int head, int warp, int lane, const OutGate& gate, const XbOut& xb,
                                           int64_t R, int num_heads) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  const int64_t regs_per_row = xb.pitch / 2;
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 16 * warp + (lane >> 2) + 8 * h;
      if (i >= nr) continue;
      const int c = 8 * dt + 2 * (lane & 3);  // the pair's first column in the head
      float v0 = o[dt][2 * h] / l[h], v1 = o[dt][2 * h + 1] / l[h];
      if (gate.g != nullptr) {
        const float* g = gate.g + (r0 + i) * gate.ld + int64_t{head} * gate.head_stride + c;
        v0 = v0 * d_sigmoid(g[0]);
        v1 = v1 * d_sigmoid(g[1]);
      }
      float* y = out + (r0 + i) * ldo + int64_t{head} * HD + c;
      y[0] = v0;
      y[1] = v1;
      if (xb.regs != nullptr) xb.regs[(r0 + i) * regs_per_row + (int64_t{head} * HD + c) / 2] = tc::pack_bf16x2(v0, v1);
    }
  if (xb.regs == nullptr) return;
  const int64_t width = int64_t{num_heads} * HD;
  const bool last_head = head == num_heads - 1;
  if (last_head) {
    for (int i = 16 * warp; i < 16 * warp + 16 && i < nr; ++i)
      xb_write(xb, r0 + i, nullptr, width, width, xb.pitch, lane, 32);
  }
  if (r0 + nr == R && warp == 0) {
    const int64_t k0 = int64_t{head} * HD, k1 = last_head ? xb.pitch : k0 + HD;
    for (int64_t m = R; m < xb.rows; ++m) xb_write(xb, m, nullptr, width, k0, k1, lane, 32);
  }
}

}  // namespace
}  // namespace specserve::cuda::kernels
