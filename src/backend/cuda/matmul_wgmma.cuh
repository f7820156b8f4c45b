#pragma once
// The Hopper warpgroup tensor-core matmul (matmul_wgmma_sm90a.cu) for 33 rows and more (verify of
// several sequences, the drafter's blocks, prefill): its tile shapes, the shared-memory image wgmma
// reads, and the shape choice. Plain C++ that also compiles on the host.
//
// Why: the mma.sync tiled kernel (matmul_tensor_core.cu) reached 90-190 TFLOP/s at 256 rows; wgmma
// (asynchronous, a warpgroup of 4 warps issuing m64 x n128 x k16 from shared memory) is Hopper's way to
// the tensor cores' rate. Numerics: the contract heading matmul_tensor_core.cu, unchanged: the same
// bf16 copy of x, the same K slices, one f32 accumulator chain per slice fed one k16 chunk at a time in
// increasing k (one wgmma k16 step per chunk, starting from +0, never a chunk past the slice's end),
// the slices summed in order through the cluster (cluster_reduce). That one wgmma k16 step gives an
// element the bits one mma.sync.m16n8k16 gives it was measured on the H200 over 2 million chains of
// 64 chunks with adversarial data (wide exponents, cancellation, zeros of both signs, subnormals,
// ties: tools/gpu/wgmma_bits_probe.cu); the GPU tests (tests/backend_cuda/test_cuda_matmul_tensor_core.cpp) compare every row of
// every wgmma tile shape with the same row computed alone by the gemv kernel, bit for bit.
//
// Shared-memory image (wgmma's no-swizzle, K-major canonical layout): an operand tile of R rows x KT k
// is cut into 8 x 8 "core matrices" (8 rows of 16 bytes, 128 contiguous bytes); the KT / 8 core
// matrices of one 8-row group are adjacent along k (leading byte offset 128) and the 8-row groups
// follow each other (stride byte offset KT / 8 * 128). Element (r, k) is at byte
// ((r / 8) * (KT / 8) + k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2, so 16-byte piece i of a tile
// (i = group * KT + (k / 8) * 8 + r % 8) lands at byte 16 * i: consecutive threads fill one core matrix
// (no bank conflicts), and 8 threads read 8 rows' same 16 bytes of k. By default the kernel uses
// wgmma's 128-byte swizzle instead (tile_off).
#include <cstdint>

#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve::cuda::wg {

inline constexpr int kKT = 64;          // k per stage (4 chunks)
inline constexpr int kCoreBytes = 128;  // one 8 x 8 bf16 core matrix
inline constexpr int kGroupBytes = kKT / 8 * kCoreBytes;  // one 8-row group of a stage (the stride byte offset)

// A CTA of Warpgroups warpgroups stacked along M (each m64 x BN, one wgmma.m64nBNk16 per chunk).
// Swizzle: the operand tiles use wgmma's 128-byte swizzle instead of the plain core-matrix layout
// (tile_off; the same values, placed so that wgmma's reads of 8 rows hit 8 different bank groups).
template <int Warpgroups, int BN, int Stages, int MinBlocks, bool Swizzle>
struct WgTile {
  static constexpr int kWarpgroups = Warpgroups, kBN = BN, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr bool kSwizzle = Swizzle;
  static constexpr int kThreads = 128 * Warpgroups;
  static constexpr int kBM = 64 * Warpgroups;
  static constexpr int kABytes = kBM * kKT * 2, kBBytes = kBN * kKT * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // With S > 1 the partial tile (BM x BN f32, row-major) reuses the stages after the main loop; 1 KB
  // more lets the kernel start the stages on a 1024-byte boundary (the swizzle's period).
  static constexpr int kSmemBytes =
      (kStageBytes * Stages > kBM * kBN * 4 ? kStageBytes * Stages : kBM * kBN * 4) + 1024;
  static_assert(BN == 128, "the kernel issues m64n128k16");
};

// 64 x 128 (one warpgroup) and 128 x 128 (two), each 96 KB of stages: two CTAs per multiprocessor, so
// one CTA's pipeline fill and epilogue overlap the other's mma.
template <bool Swizzle>
using WgM64 = WgTile<1, 128, 4, 2, Swizzle>;
template <bool Swizzle>
using WgM128 = WgTile<2, 128, 3, 2, Swizzle>;

// Byte offset of 16-byte piece (row, k / 8) inside an operand tile: the plain layout above, or with
// the 128-byte swizzle rows of 128 bytes (the tile's 64 k) whose piece k8 sits at k8 ^ (row % 8).
template <bool Swizzle>
constexpr int tile_off(int row, int k8) {
  if constexpr (Swizzle) return row * 128 + ((k8 ^ (row & 7)) << 4);
  return (row / 8) * kGroupBytes + k8 * kCoreBytes + (row % 8) * 16;
}
// The pieces of a stage, numbered i = group * (KT / 8 * 8) + k8 * 8 + row % 8: a thread's load i.
// (In the plain layout piece i lands at byte 16 i: consecutive threads fill one core matrix.)
struct Piece {
  int row = 0, k8 = 0;
};
constexpr Piece piece_of(int i) { return Piece{(i / (kKT / 8 * 8)) * 8 + i % 8, (i / 8) % (kKT / 8)}; }

// wgmma's shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): start address >> 4 in bits
// 0-13, leading byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, the layout in 62-63. Plain
// layout (0): leading = the next core matrix along k (128), stride = the next 8-row group (1024).
// 128-byte swizzle (1): stride = the next 8 rows (1024), the leading offset unused (1).
template <bool Swizzle>
constexpr uint64_t smem_desc(uint32_t addr) {
  const uint64_t start = (addr & 0x3FFFFu) >> 4;
  if constexpr (Swizzle) return start | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
  return start | (uint64_t{kCoreBytes >> 4} << 16) | (uint64_t{kGroupBytes >> 4} << 32);
}
// Byte step of the start address from one k16 chunk of a stage to the next.
template <bool Swizzle>
constexpr int chunk_step() {
  return Swizzle ? 32 : 2 * kCoreBytes;
}

enum class WgKind { M64, M128 };

// The shape for an M x N output with S slices on `sms` multiprocessors: 128 rows when M > 64 and that
// still gives a CTA per multiprocessor, else 64.
constexpr WgKind choose_wgmma_tile(int64_t M, int64_t N, int sms, int S) {
  const int64_t ctas128 = tc::ceil_div(M, WgM128<true>::kBM) * tc::ceil_div(N, WgM128<true>::kBN) * S;
  return M > 64 && ctas128 >= sms ? WgKind::M128 : WgKind::M64;
}

}  // namespace specserve::cuda::wg
