#pragma once
// The PTX of the chunked DeltaNet state kernel (gated_deltanet_chunked.cu): 16-byte cp.async staging, and
// f32-accurate products on tensor cores (GdnStateMath::Tf32x3): each f32 operand x is split into two tf32 parts, hi =
// tf32(x) and lo = tf32(x - hi) (round to nearest, ties away; x - hi is exact in f32), so x = hi + lo to within 2^-22
// |x|; a product a b is taken as lo_a hi_b + hi_a lo_b + hi_a hi_b, three mma.m16n8k8 tf32 steps into one f32
// accumulator (the small terms first), dropping lo_a lo_b (at most 2^-22 |a b|).
//
// mma.m16n8k8.row.col.f32.tf32.tf32.f32 fragments (PTX ISA; g = lane / 4, t = lane % 4):
//   A (16 x 8, row-major): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B (8 x 8, k x n):      b0 (k = t, n = g), b1 (k = t + 4, n = g)
//   C (16 x 8):            c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
#include <cstdint>

namespace specserve::cuda::kernels::gdn_ptx {

// 16 bytes global -> shared without a register round trip (cp.async, cached in L2 only).
__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}
// Waits for every cp.async of this thread: their bytes are then visible to it (to the block after a barrier).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// x rounded to tf32 (10 stored mantissa bits), the low 13 bits cleared.
__device__ __forceinline__ uint32_t tf32_bits(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r & 0xffffe000u;
}

__device__ __forceinline__ void split(float x, uint32_t& hi, uint32_t& lo) {
  hi = tf32_bits(x);
  lo = tf32_bits(x - __uint_as_float(hi));
}

// d += a b on one 16 x 8 x 8 tile.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d += a b with a and b given as split parts (a_hi, a_lo, b_hi, b_lo).
__device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                     const uint32_t (&bh)[2], const uint32_t (&bl)[2]) {
  mma(d, al, bh);
  mma(d, ah, bl);
  mma(d, ah, bh);
}

}  // namespace specserve::cuda::kernels::gdn_ptx
