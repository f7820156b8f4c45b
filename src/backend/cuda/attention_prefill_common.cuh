#pragma once
// Internal to attention_prefill.cu (included there only): what the two prefill attention kernels share —
// the CTA shape, the per-head-dim key step, the staged kernel's shared-memory layout and the fragment
// helpers. The rule they keep and the argument are in attention_prefill.cu's header.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"

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

}  // namespace
}  // namespace specserve::cuda::kernels
