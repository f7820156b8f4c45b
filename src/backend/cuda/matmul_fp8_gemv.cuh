#pragma once
// The streaming matmul for block-scaled fp8 weights and 1-32 rows (the kernel in matmul_fp8_gemv_kernel.cuh, its
// launches in matmul_fp8_gemv.cu): its shapes, its shared-memory layout, the per-lane index code that builds the mma B
// fragments straight from the e4m3 codes, and the dequantisation identities, as plain C++ that also compiles on the
// host, so that tests/backend_cuda/test_cuda_matmul_fp8_host.cpp checks them without a GPU.
//
// The CTA is the bf16 gemv kernel's (matmul_tensor_core_gemv.cuh: 4 warps, 16 rows of x per CTA row, 16
// weight rows per warp, warps splitting the K slices of k_split(N, K), the slices summed in slice order
// at the end), and so are the k16 chunks of each slice's chain and the A fragments of the rows below M
// (x rounded to bf16 by cvt.rn.bf16x2.f32): every mma sees, for those rows, the operands of the bf16 gemv
// kernel run on the bf16 dequantisation bf16_rn(f32_rn(e4m3 × scale)) of the weight, so a row's bits are
// that kernel's, whatever M (backend/ops.h, matmul_tensor_core.cu). The A rows at or past M hold copies of
// rows below M instead of zeros: an output element depends on its own A row only (the contract's
// assumption about the tensor core), and those outputs are never stored.
//
// Per warp and 128-k tile the codes are 16 rows × 128 bytes (2 KB), copied by 16-byte cp.async into a ring
// of kStages stages (x's tile travels in the same stage); the block scales of the warp's whole run (its
// 16 rows share one 128-row block: at most ceil(run / 128) + 1 of them) arrive by 4-byte cp.async with the
// first stage. The codes are in fragment order (fp8_code_order.h: a 16-code group's word t holds k 2t, 2t + 1,
// 2t + 8, 2t + 9), so lane (g = lane / 4, t = lane % 4) finds the B fragment codes of weight row g (+ 8 for the
// second n8 tile) in chunk c (b0: k 2t, 2t + 1; b1: k 2t + 8, 2t + 9) in one word: word t of that row's
// chunk, which ldmatrix delivers (x4: rows 0-7 and 8-15 of two chunks; every 8 lanes give one 8 × 16-byte
// matrix's row addresses, and lane (g, t) receives word t of row g), four loads a tile where a 16-byte load
// per row and chunk took sixteen (four lanes of a row loading the same bytes). One fixed byte permute per
// register then puts its two codes where the dequantisation wants them. No bf16 weight tile goes through
// shared memory, and no code load in the main loop depends on another.
//
// With f32 x (1-4 rows) the warp rounds each tile's x rows to bf16 once, into its bf16 tile, in the codes'
// fragment order: lane (g, t) then reads a chunk's A registers a0 (k 2t, 2t + 1) and a2 (k 2t + 8, 2t + 9) of row
// g % M with one 8-byte load, and uses them for the fragment's rows 8-15 too (a1 = a0, a3 = a2: rows past M,
// whose outputs are never stored, as every A row past M holds a row below M).
//
// Dequantisation of a pair of codes into one bf16x2 register (b0 or b1), exact in every mode:
//   - pair bits: the bf16 bits of e4m3 × 2^-120 (fp8_pair_bits: the sign to bit 15, the seven exponent and
//     mantissa bits to bits 4-10 — exact for every finite code, subnormal ones included), from one
//     sign-replicating byte permute and a shift and a mask;
//   - fast, when the tile's scales are bf16 values in [2^-100, 2^8) (fp8_scale_fast; Qwen's FP8
//     checkpoints store bf16 scales): one bf16x2 multiply by scale × 2^120 (exact in bf16). The exact
//     product has at most 4 + 8 significant bits, so f32_rn of it is the product itself and the one bf16
//     rounding of the multiply is the definition's second rounding;
//   - folded, for any scale of magnitude below 2^8 (fp8_scale_folds): each half widened to f32 (exact,
//     e4m3 × 2^-120), × (scale × 2^120) (that factor is exact, and the product is the real e4m3 × scale, so
//     its f32 rounding is the definition's), then cvt.rn.bf16x2.f32;
//   - general (any f32 scale): each half widened to f32, × 2^120 (exact: the e4m3 value), × scale, then
//     cvt.rn.bf16x2.f32 — or, as tests and the benchmark may force, the hardware conversion of the first
//     kernel (cvt e4m3x2 -> f16x2 -> f32, × scale, cvt to bf16x2).
// The NaN codes 0x7F / 0xFF are not e4m3 values (no quantiser writes them, and the loader refuses a
// checkpoint holding them: io/fp8_blocks.h): the bit paths read them as ±480 × scale, the conversion path
// as NaN.
//
// The main loop (matmul_fp8_gemv_kernel.cuh) runs most tiles straight: a tile whose pieces are whole, whose 8
// chunks lie in one slice and one 128-k scale block, and whose scale takes the fast or the folded path is
// 4 code ldmatrix.x4 and 8 × (1 A load, 4 permutes, 4 shifts, 4 masks, 4 multiplies, 2 mma) with no branch, so the
// compiler can issue the next chunks' loads under the current ones' arithmetic (regular_tiles says which
// tiles; a warp's chain switches from its first slice's accumulators to its second's at chunk `split`,
// between tiles where it can: switch_tile). The other tiles (the run's ends, K tails, tiles cut by a slice or a scale
// block, scales of 2^8 and more, forced paths) check every chunk.
#include <cstdint>

#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"

namespace specserve::cuda::fp8g {

using tc::ceil_div;

// How x reaches the A fragments: f32 rows rounded per fragment (1-4 rows), or x's bf16 copy
// (matmul_tensor_core_xb.cuh) by ldmatrix, 8 rows (5-8 rows: the A fragment's rows 8-15 are zero) or 16.
enum class XMode : int { F32 = 0, Xb8 = 1, Xb16 = 2 };

inline constexpr int kF32MaxRows = 4;  // f32 x: the main loop's x code handles at most 4 rows
constexpr XMode x_mode(int64_t M, int64_t xb_rows) {
  return M < xb_rows && M <= kF32MaxRows ? XMode::F32 : M <= 8 ? XMode::Xb8 : XMode::Xb16;
}

// Warps a CTA: 4, or with f32 x also 8 (a 4096-row matrix's 8 slices as 8 warps of one slice each instead of 4
// warps of two: twice the warps a multiprocessor to hide this kernel's dependent shared loads, permutes and mma,
// where the grid's waves allow it: matmul_fp8_gemv.cu, fp8_warps_for). Every warp count gives the same bits:
// the slices, their chains and their sum do not depend on which warp runs them.
template <int Stages, XMode X, int Warps = 4>
struct Fp8Gemv {
  static_assert(Warps == 4 || (Warps == 8 && X == XMode::F32), "8 warps with f32 x only");
  using Shape = tc::Gemv<2, X != XMode::F32, Warps>;  // the CTA's warps and slices (gemv_shape, gemv_work)
  static constexpr int kStages = Stages;
  static constexpr XMode kX = X;
  static constexpr int kWarps = Shape::kWarps, kThreads = Shape::kThreads;
  // CTAs a multiprocessor must hold (__launch_bounds__): 2 of 8 warps (at most 128 registers a thread) or 3 of 4.
  static constexpr int kMinCtas = kWarps == 8 ? 2 : 3;
  static constexpr int kBM = Shape::kBM;        // x rows per CTA row
  static constexpr int kWarpN = Shape::kWarpN;  // weight rows per warp (two n8 tiles)
  static constexpr int kKT = 128;               // k per tile: a tile's chunks meet at most two scale blocks
  static constexpr int kChunks = kKT / tc::kMmaK;
  // With x's bf16 copy the stage's code and x rows are unpadded and their 16-byte pieces swizzled (piece_at: piece p
  // of row r stored at p ^ (r % 8)), so that 8 rows' same piece still lie in 8 bank groups (conflict-free ldmatrix)
  // and a stage is 6 KB instead of 6.5 (16 rows): 3 stages of 4 warps fit 3 CTAs a multiprocessor, where the padded
  // rows fitted 2 (the 27B's 5,120-column weights, 320 CTAs, ran in 1.2 waves at 16 rows). Measured on an H100
  // (session 49): at 16 rows the 27B's o 20.8 -> 15.8 µs, down 61.4 -> 50.1, up 86.8 -> 80.3; its verify of 16 rows
  // 19.1-19.7 -> 17.3 ms. With f32 x (decode) the code rows keep a 16-byte pad and need no swizzle.
  static constexpr bool kSwizzled = X != XMode::F32;
  static constexpr int kSQ = kSwizzled ? kKT : kKT + 16;  // code row pitch in bytes
  static constexpr int kSA = kKT + 8;                     // f32 x pitch (floats)
  static constexpr int kSB = kKT;                         // bf16 x pitch (elements): 256 bytes, swizzled
  static constexpr int kSH = kKT + 16;  // f32 x's bf16 tile pitch (elements): rows 8 banks apart (8-byte A loads)
  static constexpr int kXbRows = X == XMode::Xb8 ? 8 : 16;
  static_assert(Stages >= 2, "at least double buffering");
  static_assert(Shape::kKT == kKT, "the gemv kernel's tiles");
};

// The swizzle of a stage's code row or bf16 x row r (0 without), and where its piece p (bytes 16p .. 16p + 15) is
// stored.
template <class C>
constexpr int swizzle_key(int r) {
  return C::kSwizzled ? r & 7 : 0;
}
template <class C>
constexpr int piece_at(int r, int p) {
  return p ^ swizzle_key<C>(r);
}

// The block scales of a warp's run [begin, end) chunks: the scale column of its first chunk and how many
// columns it meets (0 for a warp without work).
struct ScaleRun {
  int64_t first = 0;
  int count = 0;
};
constexpr ScaleRun scale_run(const tc::GemvWork& w) {
  if (w.slices == 0 || w.end <= w.begin) return {};
  const int64_t first = w.begin * tc::kMmaK / 128;
  return {first, static_cast<int>((w.end - 1) * tc::kMmaK / 128 - first + 1)};
}
// Scale slots per warp for a launch of S slices of cps chunks on CTAs of `warps` warps (every warp's scale_run
// fits).
constexpr int scale_slots(int S, int64_t cps, int warps) {
  const int64_t run = int64_t{tc::gemv_shape(S, warps).spw} * cps * tc::kMmaK;
  return static_cast<int>(ceil_div(run, 128) + 1);
}

// Byte offsets in the dynamic shared memory: per warp kStages stages of [codes: 16 rows × kSQ][x: f32
// x_rows × kSA, or bf16 kXbRows × kSB], then every warp's scale slots (f32), then (f32 x) every warp's
// bf16 x tile (x_rows × kSB: the current tile's x rounded once, read by ldmatrix). After the main loop the
// slices' partial tiles reuse the bytes from 0 (the gemv kernel's part_off).
template <class C>
struct Fp8Layout {
  int x_rows = 0;  // F32: rows of x per stage (M of the launch: at most kF32MaxRows)
  int slots = 0;   // scale slots per warp (scale_slots)
  static constexpr int q_bytes() { return C::kWarpN * C::kSQ; }
  constexpr int x_bytes() const { return C::kX == XMode::F32 ? x_rows * C::kSA * 4 : C::kXbRows * C::kSB * 2; }
  constexpr int stage_bytes() const { return q_bytes() + x_bytes(); }
  constexpr int stage_off(int warp, int stage) const { return (warp * C::kStages + stage) * stage_bytes(); }
  constexpr int q_row_off(int warp, int stage, int r) const { return stage_off(warp, stage) + r * C::kSQ; }
  constexpr int q_off(int warp, int stage, int r, int k) const {
    return q_row_off(warp, stage, r) + piece_at<C>(r, k / 16) * 16 + k % 16;
  }
  // x's bf16 copy: the first byte of row r (its pieces are swizzled)
  constexpr int xb_row_off(int warp, int stage, int r) const {
    return stage_off(warp, stage) + q_bytes() + r * C::kSB * 2;
  }
  constexpr int x_off(int warp, int stage, int r, int k) const {
    return C::kX == XMode::F32 ? stage_off(warp, stage) + q_bytes() + (r * C::kSA + k) * 4
                               : xb_row_off(warp, stage, r) + piece_at<C>(r, k / 8) * 16 + k % 8 * 2;
  }
  constexpr int sc_off(int warp, int i) const {
    return C::kWarps * C::kStages * stage_bytes() + (warp * slots + i) * 4;
  }
  static constexpr int xh_row_bytes() { return C::kSH * 2; }
  constexpr int xh_off(int warp, int r, int k) const {
    const int base = (sc_off(C::kWarps, 0) + 15) / 16 * 16;
    return base + (warp * x_rows + r) * xh_row_bytes() + k * 2;
  }
  constexpr int smem_bytes(int S) const {
    const int mine = C::kX == XMode::F32 ? xh_off(C::kWarps, 0, 0) : sc_off(C::kWarps, 0);
    const int parts =
        S > 1 ? tc::GemvLayout<typename C::Shape>::part_off(S, tc::gemv_shape(S, C::kWarps).groups, 0, 0, 0) : 0;
    return mine > parts ? mine : parts;
  }
};

// ---- a lane's fragment code --------------------------------------------------------------------------

// The byte permute (PTX prmt.b32, default mode): byte i of the result is byte (s >> 4i) & 7 of the eight
// bytes {b:a} (a's bytes 0-3, b's 4-7), or, when bit 3 of that nibble is set, the selected byte's sign bit
// replicated over the byte.
SS_TC_DEV uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
#else
  const uint64_t bytes = uint64_t{a} | uint64_t{b} << 32;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nibble = (s >> (4 * i)) & 0xfu;
    uint32_t byte = static_cast<uint32_t>((bytes >> (8 * (nibble & 7u))) & 0xffu);
    if (nibble & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}

// A lane's stored word [c0 c1 c2 c3] (fp8_code_order.h) permuted by fp8o::kPairLo gives [c0, sign(c0), c1,
// sign(c1)] (the b0 register's codes; sign(c): the code's sign bit replicated over a byte), by fp8o::kPairHi the
// same of c2 c3 (b1).
//
// The bf16x2 bits of the two codes of such a permute, each times 2^-120: shifted left by 4, a half holds
// the code's seven magnitude bits at 4-10 and its sign (from the replicated byte) at 15; the mask clears the
// rest. Exact for every code but the NaN codes (e4m3 has 4 exponent bits of bias 7 and 3 mantissa bits;
// bf16 8 and 7).
constexpr uint32_t fp8_pair_bits(uint32_t ya) { return (ya << 4) & 0x87f087f0u; }

// Whether scale s (f32 bits) takes the fast path: a bf16 value (low 16 bits zero) with 2^-100 <= |s| < 2^8
// (biased exponent 27 .. 134): then s × 2^120 is a finite bf16 and every e4m3 × s an exact f32 of at most
// 12 significant bits.
constexpr bool fp8_scale_fast(uint32_t s) {
  const uint32_t e = (s >> 23) & 0xffu;
  return (s & 0xffffu) == 0 && e >= 27 && e <= 134;
}
// The bf16x2 multiplier of the fast path: s × 2^120 in both halves.
constexpr uint32_t fp8_scale_pair(uint32_t s) {
  const uint32_t h = (s >> 16) + (120u << 7);
  return h | h << 16;
}

// Whether scale s (f32 bits) takes the folded path: |s| < 2^8 (biased exponent below 135; zero and
// subnormal scales included), so that s × 2^120 is a finite f32, exactly.
constexpr bool fp8_scale_folds(uint32_t s) { return ((s >> 23) & 0xffu) < 135u; }

// A lane's offsets, computed once per warp, and the addresses the main loop reads and writes (stage 0: it adds the
// stage's offset).
template <class C>
struct Fp8Lane {
  int q_dst[2] = {};   // whole tiles: row lane / 8's byte 0 + where piece lane % 8 of rows lane / 8 + 4j is, stage 0
  int64_t q_src = 0;   // ... and its byte offset in the weight at the warp's first tile
  int q_row = 0;       // the codes' ldmatrix row ((lane & 7) + 8 ((lane >> 3) & 1)), its byte 0, stage 0
  int q_next = 0;      // 1 for lanes 16-31 (the second chunk of an x4)
  int q_key = 0;       // that row's swizzle (row % 8; 0 without)
  int a_off = 0;       // f32 x: the 8-byte A load of chunk 0 in the bf16 tile; x's copy: ldmatrix.x4's row, byte 0
  int a_next = 0;      // x's copy: 1 for lanes 16-31 (k 8-15 of a chunk: its second piece)
  int a_key = 0;       // x's copy: that row's swizzle
  int x_dst = 0;       // whole tiles: f32 x: this lane's first x piece, stage 0; x's copy: row lane / 16's byte 0
  int x_piece = 0;     // x's copy: where piece lane % 16 of row lane / 16 is stored
  int64_t x_src = 0;   // ... and its element offset in x (Xb: in the copy) at the warp's first tile
  int xh_dst[2] = {};  // f32 x: where its 4 rounded floats of row 0 go in the bf16 tile (two pairs, fragment order)

  static constexpr int piece(int p, int key) { return C::kSwizzled ? p ^ key : p; }
  // A whole tile's code piece j (0-3: row lane / 8 + 4j, bytes (lane % 8) * 16).
  constexpr int q_dst_of(int j) const { return q_dst[j & 1] + j * 4 * C::kSQ; }
  // ldmatrix.x4 of chunks 2i and 2i + 1; ldmatrix.x2 of chunk c (it reads the addresses of lanes 0-15).
  constexpr int q_pair(int i) const { return q_row + piece(2 * i + q_next, q_key) * 16; }
  constexpr int q_chunk(int c) const { return q_row + piece(c, q_key) * 16; }
  // The A fragment of chunk kk: f32 x's 8-byte load (no stage), or x's copy's ldmatrix.x4 (stage 0).
  constexpr int a_chunk(int kk) const {
    return C::kX == XMode::F32 ? a_off + kk * tc::kMmaK * 2 : a_off + piece(2 * kk + a_next, a_key) * 16;
  }
  // x's copy in a whole tile: this lane's piece of row lane / 16 + 2i (the row's swizzle is the first row's with
  // bits 1-2 flipped by 2i).
  constexpr int x_dst_of(int i) const { return x_dst + 2 * i * C::kSB * 2 + piece(x_piece, 2 * i & 6) * 16; }
};
// The codes of two chunks by one ldmatrix.x4: lanes 0-7 address rows 0-7 of chunk c, lanes 8-15 rows 8-15 of
// chunk c, lanes 16-31 the same of chunk c + 1; registers r0 r1 r2 r3 = (rows g, g + 8) × (chunks c, c + 1), word
// t (the general tiles take r0 r1 of one chunk by ldmatrix.x2, which reads the addresses of lanes 0-15).
// The A fragment with x's bf16 copy: one ldmatrix.x4 a chunk (lanes 0-15 address rows 0-15 at k 0, lanes 16-31
// rows 0-15 at k 8: a0 a1 a2 a3). Rows past the rows a stage holds read row (row % rows held) instead: their
// outputs, never stored, copy those rows' (an output element depends on its own A row only), and no register
// needs zeroing. With f32 x (1-4 rows) the warp rounds each tile's x rows to bf16 once, into its bf16 tile
// (x_dst -> xh_dst: a lane's floats k 4i .. 4i + 3 are the pairs 2q, 2q + 1 of chunk i / 4, q = i % 4, stored at
// their fragment-order slots), and lane (g, t) reads row g % M's a0 a2 of a chunk as one 8-byte word.
template <class C>
constexpr Fp8Lane<C> fp8_lane(const Fp8Layout<C>& lay, int warp, int lane, int64_t n0w, int64_t ldq, int64_t begin,
                              int64_t m0, int64_t ldx, int valid_rows) {
  Fp8Lane<C> l;
  const int g = lane >> 2, t = lane & 3;
  const int64_t k0 = begin * tc::kMmaK;
  for (int j = 0; j < 2; ++j)  // rows lane / 8 + 4j and + 8 share a swizzle
    l.q_dst[j] = lay.q_row_off(warp, 0, lane / 8) + piece_at<C>(lane / 8 + 4 * j, lane % 8) * 16;
  l.q_src = (n0w + lane / 8) * ldq + k0 + (lane % 8) * 16;
  const int q_r = (lane & 7) + ((lane >> 3) & 1) * 8;
  l.q_row = lay.q_row_off(warp, 0, q_r);
  l.q_next = lane >> 4;
  l.q_key = swizzle_key<C>(q_r);
  if constexpr (C::kX == XMode::F32) {
    const int held = valid_rows > 0 ? valid_rows : 1;
    l.a_off = lay.xh_off(warp, g % held, 4 * t);
    l.x_dst = lay.x_off(warp, 0, 0, 4 * lane);
    l.x_src = m0 * ldx + k0 + 4 * lane;
    const int chunk = (lane / 4) * tc::kMmaK, q = lane % 4;
    l.xh_dst[0] = lay.xh_off(warp, 0, chunk + fp8o::slot_of(4 * q));
    l.xh_dst[1] = lay.xh_off(warp, 0, chunk + fp8o::slot_of(4 * q + 2));
  } else {
    const int a_r = (lane & 15) % C::kXbRows;
    l.a_off = lay.xb_row_off(warp, 0, a_r);
    l.a_next = lane >> 4;
    l.a_key = swizzle_key<C>(a_r);
    l.x_dst = lay.xb_row_off(warp, 0, lane / 16);
    l.x_piece = piece_at<C>(lane / 16, lane % 16);
    l.x_src = (m0 + lane / 16) * ldx + k0 + (lane % 16) * 8;
  }
  return l;
}

// Which tile chunks use the tile's second scale: a tile from chunk ch0 meets scale columns ch0 / 8 and,
// when ch0 is not a multiple of 8, (ch0 + 7) / 8 from local chunk first_of_second on.
constexpr int first_of_second(int64_t ch0) { return ch0 % 8 == 0 ? 8 : static_cast<int>(8 - ch0 % 8); }

// ---- the main loop's tiles ----------------------------------------------------------------------------

// The tiles of a warp's run with whole 16-byte pieces (the codes' 16 rows below N, the tile's 128 k below
// K, 16-byte loads of codes and x): the first whole_tiles(...) of its `tiles` (whole: a prefix).
constexpr int whole_tiles(const tc::GemvWork& w, int tiles, bool vec, int64_t n0w, int64_t N, int64_t K) {
  if (!vec || n0w + 16 > N || w.slices == 0) return 0;
  const int64_t fit = (K - w.begin * tc::kMmaK) / 128;
  return fit < 0 ? 0 : fit < tiles ? static_cast<int>(fit) : tiles;
}

// The tiles the main loop runs straight (before the scale's check): whole, of 8 chunks below the run's end,
// starting on a 128-k block (so one scale covers them), and not holding the first chunk of the warp's
// second slice unless they start with it. Tiles [0, last) but `cut`.
struct RegularTiles {
  int last = 0;
  int cut = -1;  // the tile a slice boundary falls inside, or -1
};
constexpr RegularTiles regular_tiles(const tc::GemvWork& w, int whole) {
  RegularTiles r;
  if (w.slices == 0 || w.begin % 8 != 0) return r;
  const int64_t full = (w.end - w.begin) / 8;
  r.last = static_cast<int>(full < whole ? full : whole);
  if (w.split < w.end && (w.split - w.begin) % 8 != 0) r.cut = static_cast<int>((w.split - w.begin) / 8);
  return r;
}
constexpr bool is_regular(const RegularTiles& r, int t) { return t < r.last && t != r.cut; }
// A regular tile t starts on a 128-k block (the run starts on one), the one of the run's scale slot t.
constexpr int regular_slot(int t) { return t; }

// Where a two-slice warp's chain switches (its accumulators so far become the first slice's partial and
// the chain restarts from +0): between tiles, before tile switch_tile(w), when the slice boundary `split`
// starts a tile (the main loop does it, so no tile checks); else, inside the tile it cuts, at chunk
// switch_chunk(w), which the chunk-by-chunk path checks. A one-slice warp never switches (-1 and split ==
// end, past its last chunk).
constexpr int switch_tile(const tc::GemvWork& w) {
  if (w.slices < 2 || w.split >= w.end || (w.split - w.begin) % 8 != 0) return -1;
  return static_cast<int>((w.split - w.begin) / 8);
}
constexpr int64_t switch_chunk(const tc::GemvWork& w) { return switch_tile(w) >= 0 ? -1 : w.split; }

}  // namespace specserve::cuda::fp8g
