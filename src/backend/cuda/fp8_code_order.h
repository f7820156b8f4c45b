#pragma once
// The order of a kept fp8 matrix's e4m3 codes in CUDA device memory ("fragment order"), host and device code.
//
// Each row's codes are cut into groups of 16 consecutive columns from column 0. A group that lies wholly below K
// is stored permuted: its 32-bit word t (t = 0..3) holds the codes of columns 2t, 2t + 1, 2t + 8, 2t + 9 of the
// group, in that order. A last group cut by K (K % 16 != 0) is stored as it is. The words are exactly what lane
// (g, t) of an mma.m16n8k16 needs for its B fragment of weight row g (b0: k 2t, 2t + 1; b1: k 2t + 8, 2t + 9), so
// the fp8 gemv (matmul_fp8_gemv_kernel.cuh) reads a chunk's codes for 8 weight rows with one ldmatrix row instead of
// one 16-byte load per lane (four lanes of a row loading the same 16 bytes): a quarter of the shared-memory wavefronts.
// The code pairs (2e, 2e + 1) stay adjacent, so a pass that reads pairs (the bf16 dequantisation) finds each at
// one stored offset. The W8A8 prefill GEMM reads the weight's codes and x's codes in the same order (the
// activation pass writes x's codes permuted like the weight's), so its sums cover the same products.
//
// Who arranges: Memory::arrange_fp8_codes (backend/memory.h) after a kept fp8 matrix reaches the device
// (upload_tensors, the synthetic weights), by kernels::fp8_arrange_codes (fp8_code_order.cu). A slice of whole
// 128-column blocks of an arranged matrix is arranged (its groups are the matrix's groups). Host code that builds
// device codes itself (tests, benchmarks) calls fp8_arrange_codes once.
#include <cstdint>

#if defined(__CUDACC__)
#define SS_FP8_ORDER_DEV __host__ __device__ __forceinline__
#else
#define SS_FP8_ORDER_DEV inline
#endif

namespace specserve::cuda::fp8o {

inline constexpr int kGroup = 16;  // codes a permuted group holds (one mma k16 chunk)

// The stored byte (0..15) of a whole group's column j (0..15): pair e = j / 2 goes to word e % 4, half e / 4.
SS_FP8_ORDER_DEV constexpr int slot_of(int j) { return 4 * ((j >> 1) & 3) + 2 * (j >> 3) + (j & 1); }
// The column (0..15) a whole group stores at byte s: the inverse of slot_of.
SS_FP8_ORDER_DEV constexpr int column_of(int s) { return 8 * ((s >> 1) & 1) + 2 * (s >> 2) + (s & 1); }

// Whether column k's group lies wholly below K (is stored permuted).
SS_FP8_ORDER_DEV constexpr bool whole_group(int64_t k, int64_t K) { return (k | (kGroup - 1)) < K; }
// The stored offset, within its row, of column k of a row of K codes.
SS_FP8_ORDER_DEV constexpr int64_t stored_index(int64_t k, int64_t K) {
  return whole_group(k, K) ? (k & ~int64_t{kGroup - 1}) + slot_of(static_cast<int>(k & (kGroup - 1))) : k;
}

// The byte permutes (PTX prmt.b32, default mode: fp8g::prmt) that read a stored word [c0 c1 c2 c3] (columns 2t,
// 2t + 1, 2t + 8, 2t + 9): kPairLo gives [c0, sign(c0), c1, sign(c1)] for b0 and kPairHi the same of c2 c3 for b1
// (sign(c): the code's sign bit over a byte, the dequantisation's input: matmul_fp8_gemv.cuh).
inline constexpr uint32_t kPairLo = 0x9180u;
inline constexpr uint32_t kPairHi = 0xB3A2u;

}  // namespace specserve::cuda::fp8o
