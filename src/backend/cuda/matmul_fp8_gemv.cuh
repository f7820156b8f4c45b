#pragma once
// The streaming matmul for block-scaled fp8 weights and 1-32 rows (matmul_fp8_gemv.cu): its shapes, its
// shared-memory layout, the per-lane index code that builds the mma B fragments straight from the e4m3 codes,
// and the dequantisation identities, as plain C++ that also compiles on the host, so that
// tests/backend_cuda/test_cuda_matmul_fp8_host.cpp checks them without a GPU.
//
// The CTA is the bf16 gemv kernel's (matmul_tensor_core_gemv.cuh: 4 warps, 16 rows of x per CTA row, 16
// weight rows per warp, warps splitting the K slices of k_split(N, K), the slices summed in slice order
// at the end), and so are the k16 chunks of each slice's chain and the A fragments: every mma sees the
// operands of the bf16 gemv kernel run on the bf16 dequantisation bf16_rn(f32_rn(e4m3 × scale)) of the
// weight, so a row's bits are that kernel's, whatever M (backend/ops.h, matmul_tensor_core.cu).
//
// Per warp and 128-k tile the codes are 16 rows × 128 bytes (2 KB), copied by 16-byte cp.async into a ring
// of kStages stages (x's tile travels in the same stage); the block scales of the warp's whole run (its
// 16 rows share one 128-row block: at most ceil(run / 128) + 1 of them) arrive by 4-byte cp.async with the
// first stage. A lane needs, for weight row g (+ 8 for the second n8 tile) and chunk c, the codes at k =
// 2t, 2t + 1 (B register b0) and 2t + 8, 2t + 9 (b1) of the chunk (g = lane / 4, t = lane % 4: the mma
// B fragment): two 4-byte shared loads (words (t / 2) and 2 + t / 2 of the chunk's 16 codes), and a byte
// permute that puts the four codes where the dequantisation wants them. No bf16 tile goes through shared
// memory, and no load in the main loop depends on another.
//
// Dequantisation of a pair of codes into one bf16x2 register (b0 or b1), exact in every mode:
//   - pair bits: the bf16 bits of e4m3 × 2^-120 (fp8_pair_bits: the sign to bit 15, the seven exponent and
//     mantissa bits shifted right by 4 — exact for every finite code, subnormal ones included);
//   - fast, when the tile's scales are bf16 values in [2^-100, 2^8) (fp8_scale_fast; Qwen's FP8
//     checkpoints store bf16 scales): one bf16x2 multiply by scale × 2^120 (exact in bf16). The exact
//     product has at most 4 + 8 significant bits, so f32_rn of it is the product itself and the one bf16
//     rounding of the multiply is the definition's second rounding;
//   - general (any f32 scale): each half widened to f32 (exact), × 2^120 (exact: the e4m3 value), × scale
//     (the definition's f32 rounding), then cvt.rn.bf16x2.f32 — or, as tests and the benchmark may force,
//     the hardware conversion of the previous kernel (cvt e4m3x2 -> f16x2 -> f32, × scale, cvt to bf16x2).
// The NaN codes 0x7F / 0xFF are not e4m3 values (no quantiser writes them): the bit path reads them as
// ±480 × scale, the conversion path as NaN; neither is covered by the bits contract.
#include <cstdint>

#include "backend/cuda/matmul_tensor_core_gemv.cuh"

namespace specserve::cuda::fp8g {

using tc::ceil_div;

// How x reaches the A fragments: f32 rows rounded per fragment (1-4 rows), or x's bf16 copy
// (matmul_tensor_core_xb.cuh) by ldmatrix, 8 rows (5-8 rows: the A fragment's rows 8-15 are zero) or 16.
enum class XMode : int { F32 = 0, Xb8 = 1, Xb16 = 2 };

constexpr XMode x_mode(int64_t M, int64_t xb_rows) {
  return M < xb_rows ? XMode::F32 : M <= 8 ? XMode::Xb8 : XMode::Xb16;
}

template <int Stages, XMode X>
struct Fp8Gemv {
  using Shape = tc::Gemv<2, X != XMode::F32>;  // the CTA's warps and slices (gemv_shape, gemv_work, part_off)
  static constexpr int kStages = Stages;
  static constexpr XMode kX = X;
  static constexpr int kWarps = Shape::kWarps, kThreads = Shape::kThreads;
  static constexpr int kBM = Shape::kBM;        // x rows per CTA row
  static constexpr int kWarpN = Shape::kWarpN;  // weight rows per warp (two n8 tiles)
  static constexpr int kKT = 128;               // k per tile: a tile's chunks meet at most two scale blocks
  static constexpr int kChunks = kKT / tc::kMmaK;
  static constexpr int kSQ = kKT + 16;  // code row pitch in bytes: rows 4 banks apart (conflict-free word loads)
  static constexpr int kSA = kKT + 8;   // f32 x pitch (floats): conflict-free 8-byte fragment reads
  static constexpr int kSB = kKT + 8;   // bf16 x pitch (elements): ldmatrix rows in 8 distinct bank groups
  static constexpr int kXbRows = X == XMode::Xb8 ? 8 : 16;
  static_assert(Stages >= 2, "at least double buffering");
  static_assert(Shape::kKT == kKT, "the gemv kernel's tiles");
};

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
// Scale slots per warp for a launch of S slices of cps chunks (every warp's scale_run fits).
constexpr int scale_slots(int S, int64_t cps) {
  const int64_t run = int64_t{tc::gemv_shape(S).spw} * cps * tc::kMmaK;
  return static_cast<int>(ceil_div(run, 128) + 1);
}

// Byte offsets in the dynamic shared memory: per warp kStages stages of [codes: 16 rows × kSQ][x: f32
// x_rows × kSA, or bf16 kXbRows × kSB], then every warp's scale slots (f32). After the main loop the
// slices' partial tiles reuse the bytes from 0 (the gemv kernel's part_off).
template <class C>
struct Fp8Layout {
  int x_rows = 0;  // F32: rows of x per stage (min(M, 16) of the launch; at most 4)
  int slots = 0;   // scale slots per warp (scale_slots)
  static constexpr int q_bytes() { return C::kWarpN * C::kSQ; }
  constexpr int x_bytes() const { return C::kX == XMode::F32 ? x_rows * C::kSA * 4 : C::kXbRows * C::kSB * 2; }
  constexpr int stage_bytes() const { return q_bytes() + x_bytes(); }
  constexpr int stage_off(int warp, int stage) const { return (warp * C::kStages + stage) * stage_bytes(); }
  constexpr int q_off(int warp, int stage, int r, int k) const { return stage_off(warp, stage) + r * C::kSQ + k; }
  constexpr int x_off(int warp, int stage, int r, int k) const {
    return stage_off(warp, stage) + q_bytes() + (C::kX == XMode::F32 ? (r * C::kSA + k) * 4 : (r * C::kSB + k) * 2);
  }
  constexpr int sc_off(int warp, int i) const {
    return C::kWarps * C::kStages * stage_bytes() + (warp * slots + i) * 4;
  }
  constexpr int smem_bytes(int S) const {
    const int mine = sc_off(C::kWarps, 0);
    const int parts = S > 1 ? tc::GemvLayout<typename C::Shape>::part_off(S, tc::gemv_shape(S).groups, 0, 0, 0) : 0;
    return mine > parts ? mine : parts;
  }
};

// ---- a lane's fragment code --------------------------------------------------------------------------

// The byte permute (PTX prmt.b32, default mode): byte i of the result is byte (s >> 4i) & 7 of the eight
// bytes {b:a} (a's bytes 0-3, b's 4-7).
SS_TC_DEV uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
#else
  const uint64_t bytes = uint64_t{a} | uint64_t{b} << 32;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) d |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return d;
#endif
}

// Lane (g = lane / 4, t = lane % 4) reads, per weight row and chunk, the 4-byte words w0 at byte 4 (t / 2)
// and w1 at 8 + 4 (t / 2) of the chunk's 16 codes; its codes are half t % 2 of each. The permute gives
// y = [c2, c0, c3, c1] (bytes 0..3; c0 c1 = k 2t, 2t + 1 from w0, c2 c3 = k 2t + 8, 2t + 9 from w1), so y
// holds b0's codes in bytes 1 and 3 and y << 8 holds b1's.
constexpr uint32_t pair_selector(int lane) { return (lane & 1) ? 0x3726u : 0x1504u; }
constexpr int word_byte(int lane) { return 4 * ((lane & 3) >> 1); }

// The bf16x2 bits of the codes in bytes 1 (low half) and 3 (high half) of y, each times 2^-120: exact for
// every code but the NaN codes (e4m3 has 4 exponent bits of bias 7 and 3 mantissa bits; bf16 8 and 7).
constexpr uint32_t fp8_pair_bits(uint32_t y) { return (y & 0x80008000u) | ((y & 0x7f007f00u) >> 4); }

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

// A lane's offsets, computed once per warp: the main loop adds the stage, the chunk and the n8 tile.
template <class C>
struct Fp8Lane {
  int q_dst = 0;       // whole tiles: this lane's first code piece (row lane / 8, bytes (lane % 8) * 16), stage 0
  int64_t q_src = 0;   // ... and its byte offset in the weight at the warp's first tile
  int q_rd = 0;        // w0 of n8 tile 0, chunk 0, stage 0 (w1: + 8; tile 1: + 8 rows; chunk c: + 16 c)
  uint32_t sel = 0;    // pair_selector
  int shift = 0;       // the conversion path: 16 (t % 2), the half of w0 / w1 holding the lane's codes
  int a_off = 0;       // F32: the f32 pair (row g, k 2t; row 0 past M) of chunk 0, stage 0; Xb: ldmatrix's row
  bool a_row = false;  // F32: row g holds x (g < valid rows)
  int x_dst = 0;       // whole tiles: this lane's first x piece, stage 0
  int64_t x_src = 0;   // ... and its element offset in x (Xb: in the copy) at the warp's first tile
};
template <class C>
constexpr Fp8Lane<C> fp8_lane(const Fp8Layout<C>& lay, int warp, int lane, int64_t n0w, int64_t ldq, int64_t begin,
                              int64_t m0, int64_t ldx, int valid_rows) {
  Fp8Lane<C> l;
  const int g = lane >> 2, t = lane & 3;
  const int64_t k0 = begin * tc::kMmaK;
  l.q_dst = lay.q_off(warp, 0, lane / 8, (lane % 8) * 16);
  l.q_src = (n0w + lane / 8) * ldq + k0 + (lane % 8) * 16;
  l.q_rd = lay.q_off(warp, 0, g, word_byte(lane));
  l.sel = pair_selector(lane);
  l.shift = 16 * (t & 1);
  if constexpr (C::kX == XMode::F32) {
    l.a_row = g < valid_rows;
    l.a_off = lay.x_off(warp, 0, l.a_row ? g : 0, 2 * t);  // (a row past M reads row 0, then gives zero)
    l.x_dst = lay.x_off(warp, 0, 0, 4 * lane);
    l.x_src = m0 * ldx + k0 + 4 * lane;
  } else {
    // ldmatrix: x4 lanes 0-15 address rows 0-15 at k 0, lanes 16-31 rows 0-15 at k 8 (a0 a1 a2 a3);
    // x2 lanes 0-7 rows 0-7 at k 0, lanes 8-15 rows 0-7 at k 8 (a0 a2).
    const int row = C::kX == XMode::Xb16 ? (lane & 15) : (lane & 7);
    const int col = C::kX == XMode::Xb16 ? (lane >> 4) * 8 : ((lane >> 3) & 1) * 8;
    l.a_off = lay.x_off(warp, 0, row, col);
    l.x_dst = lay.x_off(warp, 0, lane / 16, (lane % 16) * 8);
    l.x_src = (m0 + lane / 16) * ldx + k0 + (lane % 16) * 8;
  }
  return l;
}

// Which tile chunks use the tile's second scale: a tile from chunk ch0 meets scale columns ch0 / 8 and,
// when ch0 is not a multiple of 8, (ch0 + 7) / 8 from local chunk first_of_second on.
constexpr int first_of_second(int64_t ch0) { return ch0 % 8 == 0 ? 8 : static_cast<int>(8 - ch0 % 8); }

}  // namespace specserve::cuda::fp8g
