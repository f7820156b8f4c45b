#pragma once
// Stands in for src/backend/cuda/gated_deltanet_chunked_ptx.cuh in the host emulation: cp.async as a
// plain copy, cvt.rna.tf32.f32 (round to nearest, ties away, low 13 bits cleared) in integer
// arithmetic, and the mma as the emulator's warp collective.
#include "cuda_emu.h"

namespace specserve::cuda::kernels::gdn_ptx {

inline void cp_async16(float* dst, const float* src) { std::memcpy(dst, src, 16); }
inline void cp_async_wait_all() {}
inline uint32_t tf32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return (u + 0x1000u) & 0xffffe000u;
}
inline void split(float x, uint32_t& hi, uint32_t& lo) {
  hi = tf32_bits(x);
  lo = tf32_bits(x - emu::as_float(hi));
}
inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) { emu_warp_mma(d, a, b); }
inline void mma3(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4], const uint32_t (&bh)[2],
                 const uint32_t (&bl)[2]) {
  mma(d, al, bh);
  mma(d, ah, bl);
  mma(d, ah, bh);
}

}  // namespace specserve::cuda::kernels::gdn_ptx
