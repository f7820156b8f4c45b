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
// ties: tools/gpu/archive/wgmma_bits_probe.cu); the GPU tests (tests/backend_cuda/test_cuda_matmul_tensor_core.cpp)
// compare every row of every wgmma tile shape with the same row computed alone by the gemv kernel, bit for bit.
//
// Shared-memory image: wgmma's K-major layout with the 128-byte swizzle. An operand tile of R rows x 64
// k (128 bytes a row) keeps its rows in order, and the 16-byte piece k8 (k 8 k8 .. 8 k8 + 7) of row r
// sits at piece position k8 ^ (r % 8) (tile_off), so that wgmma's reads of 8 rows' same piece, and a
// warp's cp.async writes of them, fall in 8 different bank groups. (The plain core-matrix layout,
// without the swizzle, measured 10-50 % slower on every shape: docs/history/GPU_PERF_NOTES.md, session 7.)
#include <cstdint>

#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve::cuda::wg {

inline constexpr int kKT = 64;  // k per stage (4 chunks)

// A CTA of Warpgroups warpgroups stacked along M (each m64 x BN, one wgmma.m64nBNk16 per chunk).
// Pipelined: a warpgroup leaves one stage's wgmma running while it issues the next stage's (the loads
// then run Stages - 2 tiles ahead instead of Stages - 1); otherwise it waits for them before the next
// stage's barrier.
template <int Warpgroups, int BN, int Stages, int MinBlocks, bool Pipelined>
struct WgTile {
  static constexpr int kWarpgroups = Warpgroups, kBN = BN, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr bool kPipelined = Pipelined;
  static constexpr int kThreads = 128 * Warpgroups;
  static constexpr int kBM = 64 * Warpgroups;
  static constexpr int kABytes = kBM * kKT * 2, kBBytes = kBN * kKT * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // With S > 1 the partial tile (BM x BN f32, row-major) reuses the stages after the main loop; 1 KB
  // more lets the kernel start the stages on a 1024-byte boundary (the swizzle's period).
  static constexpr int kSmemBytes =
      (kStageBytes * Stages > kBM * kBN * 4 ? kStageBytes * Stages : kBM * kBN * 4) + 1024;
  static_assert(BN == 128, "the kernel issues m64n128k16");
  static_assert(!Pipelined || Stages >= 3, "a pipelined CTA keeps one stage in the mma and one loading");
};

// 64 x 128 (one warpgroup, 4 stages of 24 KB) and 128 x 128 (two warpgroups, 3 stages of 32 KB): two
// CTAs per multiprocessor, so one CTA's pipeline fill and epilogue overlap the other's mma. Pipelined,
// the 128 x 128 tile takes 4 stages (one CTA per multiprocessor).
template <bool Pipelined>
using WgM64 = WgTile<1, 128, 4, 2, Pipelined>;
template <bool Pipelined>
using WgM128 = WgTile<2, 128, Pipelined ? 4 : 3, Pipelined ? 1 : 2, Pipelined>;

// Byte offset of 16-byte piece (row, k8) inside an operand tile (128-byte swizzle).
constexpr int tile_off(int row, int k8) { return row * 128 + ((k8 ^ (row & 7)) << 4); }
// The pieces of a stage, numbered i = group * (KT / 8 * 8) + k8 * 8 + row % 8: a thread's load i.
struct Piece {
  int row = 0, k8 = 0;
};
constexpr Piece piece_of(int i) { return Piece{(i / (kKT / 8 * 8)) * 8 + i % 8, (i / 8) % (kKT / 8)}; }

// wgmma's shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): start address >> 4 in bits
// 0-13, leading byte offset >> 4 in 16-29 (unused by the swizzled K-major layout: 1), stride byte
// offset >> 4 in 32-45 (the next 8 rows: 1024), the layout in 62-63 (1: 128-byte swizzle). The stage
// starts on a 1024-byte boundary, so the base offset (bits 49-51) is 0; chunk kk of a stage starts
// 32 kk bytes in.
constexpr uint64_t smem_desc(uint32_t addr) {
  return uint64_t{(addr & 0x3FFFFu) >> 4} | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
inline constexpr int kChunkStep = 32;

enum class WgKind { M64, M128, Serial };

// The shape for an M x N output with S slices on `sms` multiprocessors: 128 rows when M > 64 and that
// still gives a CTA per multiprocessor, else 64.
constexpr WgKind choose_wgmma_tile(int64_t M, int64_t N, int sms, int S) {
  const int64_t ctas128 = tc::ceil_div(M, WgM128<false>::kBM) * tc::ceil_div(N, WgM128<false>::kBN) * S;
  return M > 64 && ctas128 >= sms ? WgKind::M128 : WgKind::M64;
}

}  // namespace specserve::cuda::wg

namespace specserve::cuda::wg {

// The slice-serial kernel (matmul_wgmma_serial_sm90a.cu): one CTA per 128 x 128 output tile runs ALL
// of the tile's S slices, one after another, in one pipelined K loop: each slice's chain into a fresh
// accumulator, added to the running total when the slice ends (((p0 + p1) + p2) + ..., sum_slices'
// order), so no cluster and no partial-tile exchange. Warp-specialised: kProducerWarps warps stream
// the K tiles into kStages shared-memory stages (cp.async; a stage is announced full once its bytes
// have landed and been fenced for the async proxy), two consumer warpgroups issue the wgmma and hand
// each stage back as soon as its wgmma are done. One CTA (3 warpgroups) per multiprocessor.
struct WgSerial {
  static constexpr int kWarpgroups = 2, kBM = 128, kBN = 128, kStages = 6, kProducerWarps = 4;
  // Registers per thread after setmaxnreg: the producer warpgroup gives up what the consumers' two
  // accumulator sets (the slice's chain and the running total: 128 floats) need.
  static constexpr int kProducerRegs = 56, kConsumerRegs = 224;
  static constexpr int kProducerThreads = 32 * kProducerWarps;
  static constexpr int kConsumerThreads = 128 * kWarpgroups;
  static constexpr int kThreads = kProducerThreads + kConsumerThreads;
  static constexpr int kABytes = kBM * kKT * 2, kBBytes = kBN * kKT * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kSmemBytes = kStageBytes * kStages + 1024;  // + the 1024-byte alignment slack
  // Tiles ahead of the one the consumers wait for: a stage is announced after the loads of
  // kStages - 2 later tiles are issued (two stages are with the consumers: one in the mma, one done
  // but not yet handed back).
  static constexpr int kLoadsInFlight = kStages - 2;
};

// The K tiles of a slice-serial CTA: every slice's tiles in slice order, a slice's tile t covering its
// chunks [begin + 4 t, min(begin + 4 t + 4, end)).
struct SerialTile {
  int64_t slice = 0, chunk0 = 0, chunk_end = 0;  // the tile's first chunk, and its slice's end
  bool last_of_slice = false;
};
// Tile g of a (chunks, S, cps) split: slices of tiles_per = ceil(cps / 4) tiles (the last slice may
// have fewer chunks, and so fewer tiles).
constexpr int64_t serial_tiles(int64_t chunks, int64_t cps) {
  const int64_t per = tc::ceil_div(cps, kKT / tc::kMmaK), S = tc::ceil_div(chunks, cps);
  const int64_t last = chunks - (S - 1) * cps;
  return (S - 1) * per + tc::ceil_div(last, kKT / tc::kMmaK);
}
// Tile `in` of slice `slice` of a (chunks, cps) split.
constexpr SerialTile serial_tile_in(int64_t slice, int64_t in, int64_t chunks, int64_t cps) {
  SerialTile t;
  t.slice = slice;
  const int64_t begin = slice * cps, end = begin + cps < chunks ? begin + cps : chunks;
  t.chunk0 = begin + in * (kKT / tc::kMmaK);
  t.chunk_end = end;
  t.last_of_slice = t.chunk0 + kKT / tc::kMmaK >= end;
  return t;
}
constexpr SerialTile serial_tile(int64_t g, int64_t chunks, int64_t cps) {
  const int64_t per = tc::ceil_div(cps, kKT / tc::kMmaK);
  return serial_tile_in(g / per, g % per, chunks, cps);
}

// serial_tile(g), serial_tile(g + 1), ... without a division a tile: one at the start, then a counter
// within the slice. (serial_tile's g / per on every K tile was a dependent integer division — ~20
// instructions even on nvcc's 32-bit bypass — in the consumers' and the one producer thread's loop.)
class SerialWalk {
 public:
  constexpr SerialWalk(int64_t g, int64_t chunks, int64_t cps)
      : chunks_(chunks), cps_(cps), per_(tc::ceil_div(cps, kKT / tc::kMmaK)), slice_(g / per_), in_(g % per_) {}
  constexpr SerialTile tile() const { return serial_tile_in(slice_, in_, chunks_, cps_); }
  constexpr void next() {
    if (++in_ == per_) in_ = 0, ++slice_;
  }

 private:
  int64_t chunks_, cps_, per_, slice_, in_;
};

}  // namespace specserve::cuda::wg
