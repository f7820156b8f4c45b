#pragma once
// Helpers the tensor-core attention kernels share (attention_free.cu, the drafter's free-order kernel;
// attention_prefill_*.cuh, the prefill kernels; attention_split_tc.cu, decode and verify rows): the keys of
// one step per head dim, V's B fragments read transposed by ldmatrix, key/value tiles staged into bf16 rows
// from an f32 or a bf16 cache, exp2 of the hardware.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"

namespace specserve::cuda::kernels {

// The keys one step of the prefill kernels walks: 64 at head dim 128, 32 at 256 (O alone is 128 registers a
// thread there). A function of the head dim alone: a row's bits depend on it. (The split kernel of decode
// and verify rows, attention_split_tc.cu, takes 32 at both.)
template <int HD>
constexpr int tc_step_keys() {
  static_assert(HD == 128 || HD == 256, "the tensor-core attention kernels serve head dims 128 and 256");
  return HD == 128 ? 64 : 32;
}

// ex2.approx of the hardware (one MUFU op, flush-to-zero): the same instruction for every row;
// 2^-inf = +0 exactly.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.L1 [%0];\n" ::"l"(p)); }

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

}  // namespace specserve::cuda::kernels
