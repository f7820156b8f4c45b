#pragma once
// The tensor-core matmul for bf16 weights (matmul_tensor_core.cu, whose header states the numerics
// contract): the CTA tile shapes, the shared-memory layout of one pipeline stage, and the per-thread
// index code (stage loads, A fragments, ldmatrix addresses, the output store, the tile order).
//
// Everything here is plain C++ that also compiles on the host (nvcc: device functions; a host
// compiler: inline functions), so the CPU emulation of the kernel in
// tests/backend_cuda/test_cuda_matmul_tensor_core.cpp runs the very same index code the kernel runs,
// with its own transcription of the PTX ISA's ldmatrix and mma.m16n8k16 fragment tables.
#include <cstdint>

#if defined(__CUDACC__)
#define SS_TC_DEV __device__ __forceinline__
#define SS_TC_UNROLL _Pragma("unroll")
#else
#define SS_TC_DEV inline
#define SS_TC_UNROLL
#endif

namespace specserve::cuda::tc {

inline constexpr int kMmaK = 16;  // k per mma.m16n8k16 step ("chunk")

// A CTA of WarpsM x WarpsN warps; each warp computes WarpM16 x WarpN8 mma tiles (16 x 8 outputs each),
// so the CTA tile is BM = 16 * WarpM16 * WarpsM rows by BN = 8 * WarpN8 * WarpsN columns. Each
// pipeline stage holds KT consecutive k of the A tile and of the B tile, both bf16: the tiled kernel
// reads x from its bf16 copy (matmul_tensor_core_xb.cuh, rounded once per call exactly as the A
// fragments of the streaming kernel round it) and loads both operands' fragments with ldmatrix.
// MinBlocks: CTAs per multiprocessor the register budget is sized for (__launch_bounds__).
template <int WarpsM, int WarpsN, int WarpM16, int WarpN8, int KT, int Stages, int MinBlocks = 1>
struct Tile {
  static constexpr int kWarpsM = WarpsM, kWarpsN = WarpsN;
  static constexpr int kWarpM16 = WarpM16, kWarpN8 = WarpN8;
  static constexpr int kKT = KT, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kBM = 16 * WarpM16 * WarpsM;
  static constexpr int kBN = 8 * WarpN8 * WarpsN;
  // Row pitches in shared memory: KT + 8 bf16 (16 bytes of pad; KT / 8 + 1 is odd), so the 8 row
  // addresses of one ldmatrix phase fall in 8 different 16-byte bank groups.
  static constexpr int kSA = KT + 8;
  static constexpr int kSB = KT + 8;
  static_assert(KT % 32 == 0, "KT must be a multiple of 32 (bank-conflict-free pitches, whole chunks)");
  static_assert(Stages >= 2, "at least double buffering");
};

// The tile shapes the launcher picks from (by M and by how many CTAs a shape gives: tiles never
// change an element's arithmetic, so the choice is free). M <= 32 runs the warp-split streaming kernel
// (matmul_tensor_core_gemv.cuh, TileKind::Gemv) or the 17-64-row kernel (backend/matmul_choice.h decides
// before choose_tile), so by default the tiled shapes serve M > 32 on devices without wgmma; the shapes
// of up to 32 rows run only when tests force them. (A first-generation streaming kernel for M <= 16 left
// the tree in issue 31: docs/DECISIONS.md §7.)
// The shapes of 128 columns keep two CTAs (110 KB of stages each) per multiprocessor: 6-8 weight
// tiles of 18 KB in flight per SM for the memory-bound verify shapes, and two CTAs to overlap one's
// pipeline fill and epilogue with the other's mma for the compute-bound ones.
using TileM16 = Tile<1, 4, 1, 1, 128, 8>;     // M <= 16 (forced only; decode streams): 16 x 32
using TileM16N8 = Tile<1, 1, 1, 1, 256, 8>;   // M <= 16 with few columns (forced only): 16 x 8
using TileM32N32 = Tile<1, 4, 2, 1, 128, 6>;  // 32 x 32: M <= 32 with few columns
using TileM32 = Tile<1, 4, 2, 4, 64, 4, 2>;   // 32 x 128: verify, M <= 32; warps of 32 x 32
using TileM64N32 = Tile<2, 2, 2, 2, 64, 6>;   // 64 x 32
using TileM64N64 = Tile<2, 2, 2, 4, 64, 4>;   // 64 x 64
using TileM64 = Tile<2, 4, 2, 4, 64, 4, 2>;   // 64 x 128: verify, M <= 64; 8 warps of 32 x 32
using TileM128N64 = Tile<2, 2, 4, 4, 32, 4>;  // 128 x 64
using TileM128 = Tile<2, 4, 4, 4, 64, 3, 2>;  // 128 x 128: verify M > 64, prefill; 8 warps of 64 x 32

// Wgmma64 / Wgmma128: the Hopper warpgroup kernel's shapes (matmul_wgmma.cuh), which the launcher
// prefers for M > 32 on a compute capability 9.0 device (the M128 tile where it cannot run).
enum class TileKind {
  M16,
  M16N8,
  M32N32,
  M32,
  M64N32,
  M64N64,
  M64,
  M128N64,
  M128,
  Gemv,
  Wgmma64,
  Wgmma128,
  WgmmaSerial
};
inline constexpr int kTileKinds = 13;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- the split of K (a function of N and K only: never of M, the tile or the device) ----------------
// The ceil(K / 16) chunks are cut into S slices of `cps` consecutive chunks (the last may be shorter),
// slice s = chunks [s * cps, min((s + 1) * cps, chunks)). Each slice is one mma chain per output
// element; the S partials are summed in f32 in the fixed order ((p0 + p1) + p2) + ... (sum_slices).
// S grows (1, 2, 4, 8) while the streaming kernel would have fewer than 512 CTAs of 64 columns and
// every slice keeps at least 16 chunks (256 k): small-N matrices get enough CTAs and short chains;
// large ones (lm_head) keep S = 1. S <= 8: the slices of one output tile are one thread-block cluster.
inline constexpr int kMaxSlices = 8;
inline constexpr int kSplitColumns = 64;  // columns per streaming CTA, for the CTA count above
struct KSplit {
  int S = 1;
  int64_t cps = 0;  // chunks per slice
};
// `target` (512) is the CTA count; the launchers pass split_target_ctas().
constexpr KSplit k_split(int64_t N, int64_t K, int64_t target = 512) {
  const int64_t chunks = ceil_div(K, kMmaK), blocks = ceil_div(N, kSplitColumns);
  int S = 1;
  while (S < kMaxSlices && blocks * S < target && chunks >= int64_t{32} * S) S *= 2;
  const int64_t cps = ceil_div(chunks, S);
  return KSplit{static_cast<int>(ceil_div(chunks, cps)), cps};
}

// The fixed-order sum of the S partials of one element: part(0) + part(1) + ... left to right in f32.
template <class Part>
SS_TC_DEV float sum_slices(int S, Part part) {
  float v = part(0);
  for (int s = 1; s < S; ++s) v = v + part(s);
  return v;
}

// The CTA count k_split aims at: 512 (other targets measured no faster: docs/DECISIONS.md, matmul; a
// constant, so S stays a function of N and K only).
constexpr int64_t split_target_ctas() { return 512; }

// Which tile shape the launcher uses for an M x N output on a device with `sms` multiprocessors (S
// CTAs per output tile): the tallest shape M needs (32, 64 or 128 rows: x is read once per column
// tile, the weights once per row tile), 128 columns wide when that still gives about 3/4 of a CTA per
// multiprocessor, narrower otherwise (see above for the gemv kernel).
constexpr TileKind choose_tile(int64_t M, int64_t N, int sms, int S) {
  const int64_t want = (int64_t{sms} * 3 + 3) / 4;
  auto enough = [&](int bm, int bn) { return ceil_div(M, bm) * ceil_div(N, bn) * S >= want; };
  if (M <= 32) return enough(TileM32::kBM, TileM32::kBN) ? TileKind::M32 : TileKind::M32N32;
  if (M > 64) {
    if (enough(TileM128::kBM, TileM128::kBN)) return TileKind::M128;
    if (enough(TileM128N64::kBM, TileM128N64::kBN)) return TileKind::M128N64;
  }
  if (enough(TileM64::kBM, TileM64::kBN)) return TileKind::M64;
  if (enough(TileM64N64::kBM, TileM64N64::kBN)) return TileKind::M64N64;
  return TileKind::M64N32;
}

// Whether the split-K kernel for 17-64 rows (matmul_tensor_core_mid.cu), in its default mode, takes an
// M-row call of `ctas` CTAs (a CTA per multiprocessor, `sms` of them): always up to 32 rows, above only
// when its waves are at least 70 % full. At 64 rows the 27B's o and down projections (160 CTAs on 132
// multiprocessors: 61 %) ran slower than on the wgmma kernel and the 8B's q/k/v (192: 73 %) faster
// (docs/history/GPU_PERF_NOTES.md, session 13).
constexpr bool mid_fills_waves(int64_t M, int64_t ctas, int sms) {
  if (M <= 32) return true;
  const int64_t waves = ceil_div(ctas, sms);
  return ctas * 10 >= waves * sms * 7;
}

// What one launch computes (device pointers; strides in elements).
struct Params {
  const float* x = nullptr;
  int64_t ldx = 0;
  const uint16_t* w = nullptr;  // bf16 bits
  int64_t ldw = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t M = 0, N = 0, K = 0;
  int64_t chunks = 0;            // ceil(K / 16): the k16 chunks of every output (all slices)
  int S = 1;                     // K slices (k_split); CTA blockIdx.x = tile * S + slice
  int64_t cps = 0;               // chunks per slice
  int a_rows = 0;                // A rows held per stage: min(BM, M) (tiled kernel: min(BM, M rounded up to 16))
  bool vec_x = false;            // 16-byte cp.async of x (x 16-byte aligned, ldx % 4 == 0; streaming kernel)
  const uint16_t* xb = nullptr;  // tiled kernel: the bf16 copy of x (matmul_tensor_core_xb.cuh)
  int64_t ldxb = 0;              // its row pitch in elements (xb_pitch)
  bool vec_w = false;            // 16-byte cp.async of w (w 16-byte aligned, ldw % 8 == 0)
  bool early_w = false;          // gemv kernel: its first tiles' weights are loaded before pdl_wait (launch.cuh)
  int64_t nbm = 0, nbn = 0;      // CTA tiles along M and N
  int64_t group = 1;             // M tiles per raster group (tile_of)
  // Streaming kernel only: several weight matrices sharing x, K and S in one launch (q/k/v, gate/up).
  // When segments > 0, column block b (blockIdx.x / S) belongs to the first segment with b < nbn_end,
  // which supplies w, ldw, vec_w, y, ldy and N; its column blocks count from that segment's start.
  struct Segment {
    const uint16_t* w = nullptr;
    int64_t ldw = 0;
    float* y = nullptr;
    int64_t ldy = 0;
    int64_t N = 0;
    int64_t nbn_end = 0;
    bool vec_w = false;
  };
  static constexpr int kMaxSegments = 4;
  int segments = 0;
  Segment seg[kMaxSegments];
};

// The Params of the segment that column block `block` (of a streaming launch; CTA columns) belongs
// to (the launch's own when it has none); `block` becomes its index inside that segment.
SS_TC_DEV Params segment_of(const Params& launch, int64_t& block) {
  Params p = launch;
  if (launch.segments == 0) return p;
  int i = 0;
  SS_TC_UNROLL
  for (int s = 0; s < Params::kMaxSegments - 1; ++s)
    if (i == s && s + 1 < launch.segments && block >= launch.seg[s].nbn_end) i = s + 1;
  const Params::Segment& g = launch.seg[i];
  block -= i == 0 ? 0 : launch.seg[i - 1].nbn_end;
  p.w = g.w;
  p.ldw = g.ldw;
  p.vec_w = g.vec_w;
  p.y = g.y;
  p.ldy = g.ldy;
  p.N = g.N;
  return p;
}

// One weight of a streaming launch over several that share x, M, K and their K split (q/k/v, gate/up).
struct WeightPart {
  const uint16_t* w = nullptr;
  int64_t ldw = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t N = 0;
};
// The Params of a launch over `count` (1 .. Params::kMaxSegments) such weights, one(part) giving a
// lone launch's Params: with count > 1 each weight is a segment and the column blocks count over all
// of them in order (segment_of). Host code; the launchers and the emulation share it.
template <class One>
inline Params make_multi_params(const WeightPart* parts, int count, One one) {
  Params p = one(parts[0]);
  if (count == 1) return p;
  p.segments = count;
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    const Params pi = one(parts[i]);
    blocks += pi.nbn;
    p.seg[i] = {pi.w, pi.ldw, pi.y, pi.ldy, pi.N, blocks, pi.vec_w};
  }
  p.nbn = blocks;
  return p;
}

// The Params of one launch with tile shape T (host code; the launcher and the emulation share it).
template <class T>
inline Params make_params(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int64_t M,
                          int64_t N, int64_t K) {
  auto aligned16 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) == 0; };
  Params p;
  p.x = x;
  p.ldx = ldx;
  p.w = w;
  p.ldw = ldw;
  p.y = y;
  p.ldy = ldy;
  p.M = M;
  p.N = N;
  p.K = K;
  p.chunks = ceil_div(K, kMmaK);
  const KSplit split = k_split(N, K, split_target_ctas());
  p.S = split.S;
  p.cps = split.cps;
  p.a_rows = M < T::kBM ? static_cast<int>(M) : T::kBM;
  p.vec_x = aligned16(x) && (M == 1 || ldx % 4 == 0);
  p.vec_w = aligned16(w) && (N == 1 || ldw % 8 == 0);
  p.nbm = ceil_div(M, T::kBM);
  p.nbn = ceil_div(N, T::kBN);
  p.group = 16;
  return p;
}

// The Params of a tiled launch with tile shape T (host code; the launcher and the emulation share it):
// x is read from its bf16 copy xb (pitch ldxb = xb_pitch(K, T::kKT), xb_rows(M) rows, zero past M
// and K: matmul_tensor_core_xb.cuh), and each stage holds the A rows of whole m16 tiles.
template <class T>
inline Params make_tiled_params(const float* x, int64_t ldx, const uint16_t* xb, int64_t ldxb, const uint16_t* w,
                                int64_t ldw, float* y, int64_t ldy, int64_t M, int64_t N, int64_t K) {
  Params p = make_params<T>(x, ldx, w, ldw, y, ldy, M, N, K);
  const int64_t m16 = ceil_div(M, kMmaK) * kMmaK;
  p.a_rows = m16 < T::kBM ? static_cast<int>(m16) : T::kBM;
  p.xb = xb;
  p.ldxb = ldxb;
  return p;
}

// The chunks [begin, end) of slice s, and the K tiles of KT that cover them (from k = 16 * begin).
struct Slice {
  int64_t begin = 0, end = 0;
  constexpr int64_t k0() const { return begin * kMmaK; }
  constexpr int64_t tiles(int kt) const { return ceil_div((end - begin) * kMmaK, kt); }
};
constexpr Slice slice_of(const Params& p, int64_t s) {
  const int64_t b = s * p.cps;
  return Slice{b, b + p.cps < p.chunks ? b + p.cps : p.chunks};
}

// Byte offsets inside the dynamic shared memory: kStages stages of [A: a_rows x kSA bf16][B: kBN x kSB bf16].
template <class T>
struct Layout {
  int a_rows = 0;
  constexpr int a_bytes() const { return a_rows * T::kSA * 2; }
  constexpr int stage_bytes() const { return a_bytes() + T::kBN * T::kSB * 2; }
  constexpr int smem_bytes() const { return stage_bytes() * T::kStages; }
  // With S > 1 the CTA's partial tile (BM x BN f32, row-major) reuses the stages after the main loop.
  constexpr int smem_bytes(int S) const {
    return S > 1 && T::kBM * T::kBN * 4 > smem_bytes() ? T::kBM * T::kBN * 4 : smem_bytes();
  }
  constexpr int a_off(int stage, int row, int k) const { return stage * stage_bytes() + (row * T::kSA + k) * 2; }
  constexpr int b_off(int stage, int n, int k) const {
    return stage * stage_bytes() + a_bytes() + (n * T::kSB + k) * 2;
  }
};

// CTA `pid` -> its (M tile, N tile): groups of `group` M tiles are walked M-fastest, so CTAs running
// together share weight tiles (read from DRAM once, then from L2) and a bounded set of x rows.
struct TileId {
  int64_t mb = 0, nb = 0;
};
constexpr TileId tile_of(int64_t pid, int64_t nbm, int64_t nbn, int64_t group) {
  const int64_t per_group = group * nbn;
  const int64_t first = pid / per_group * group;
  const int64_t size = nbm - first < group ? nbm - first : group;
  const int64_t r = pid % per_group;
  return TileId{first + r % size, r / size};
}

// ---- per-lane fragment maps (PTX ISA, mma.m16n8k16 with .bf16; groupID = lane / 4, tig = lane % 4) --
struct RowCol {
  int row = 0, col = 0;
};
// A fragment register `reg` (0..3) holds the pair (row, col), (row, col + 1) of the 16 x 16 A tile.
constexpr RowCol a_frag(int lane, int reg) { return {(lane >> 2) + 8 * (reg & 1), 2 * (lane & 3) + 8 * (reg >> 1)}; }
// C fragment pair `half` (0: c0 c1, 1: c2 c3) holds (row, col), (row, col + 1) of the 16 x 8 C tile.
constexpr RowCol c_frag(int lane, int half) { return {(lane >> 2) + 8 * half, 2 * (lane & 3)}; }
// The row (n) and k of the 16-byte row this lane addresses in ldmatrix: x4 loads the B fragments of two
// n8 tiles (matrices: n 0-7 k 0-7, n 0-7 k 8-15, n 8-15 k 0-7, n 8-15 k 8-15 -> b[j][0], b[j][1],
// b[j+1][0], b[j+1][1]); x2 those of one (lanes 16-31 repeat lanes 0-15; their addresses are unused).
// The row (m) and k of the 16-byte row this lane addresses in ldmatrix.x4 of a 16 x 16 A tile.
constexpr RowCol a_ldsm(int lane) { return {lane & 15, (lane >> 4) * 8}; }
constexpr RowCol b_ldsm(int lane, bool x4) { return {(lane & 7) + (x4 ? (lane >> 4) << 3 : 0), ((lane >> 3) & 1) * 8}; }

// ---- per-thread code shared by the kernel and its host emulation -------------------------------------

// Loads the K tile from k0 (a multiple of 16) of the CTA tile at (m0, n0) into stage `stage`: the rows
// of xb the tile's m16 tiles cover (min(a_rows, M - m0 rounded up to 16); xb is zero past M and K and
// long enough for every tile: whole 16-byte pieces) and BN rows of w, zero past N and K (k past the
// slice's end is loaded but never used). Threads take 16-byte pieces (or single weights on the
// scalar path) round robin.
//   cp16_x / cp16_w(smem_off, src, bytes): copy `bytes` (0..16) from src, zero the rest of the 16
//   st_b16(smem_off, uint16_t): a scalar store (unaligned weights)
template <class T, class Cp16X, class Cp16W, class StB16>
SS_TC_DEV void load_stage(const Params& p, const Layout<T>& lay, int stage, int64_t m0, int64_t n0, int64_t k0, int tid,
                          Cp16X cp16_x, Cp16W cp16_w, StB16 st_b16) {
  const int64_t left = (p.M - m0 + kMmaK - 1) / kMmaK * kMmaK;
  const int rows = left < p.a_rows ? static_cast<int>(left) : p.a_rows;
  {
    constexpr int kPer = T::kKT / 8;
    for (int i = tid; i < rows * kPer; i += T::kThreads) {
      const int r = i / kPer, c = (i % kPer) * 8;
      cp16_x(lay.a_off(stage, r, c), p.xb + (m0 + r) * p.ldxb + k0 + c, 16);
    }
  }
  if (p.vec_w) {
    constexpr int kPer = T::kKT / 8;
    for (int i = tid; i < T::kBN * kPer; i += T::kThreads) {
      const int r = i / kPer, c = (i % kPer) * 8;
      const int64_t k = k0 + c, n = n0 + r;
      const int bytes = n >= p.N || k >= p.K ? 0 : p.K - k >= 8 ? 16 : static_cast<int>(p.K - k) * 2;
      cp16_w(lay.b_off(stage, r, c), bytes ? p.w + n * p.ldw + k : p.w, bytes);
    }
  } else {
    for (int i = tid; i < T::kBN * T::kKT; i += T::kThreads) {
      const int r = i / T::kKT, c = i % T::kKT;
      const int64_t k = k0 + c, n = n0 + r;
      st_b16(lay.b_off(stage, r, c), n < p.N && k < p.K ? p.w[n * p.ldw + k] : uint16_t{0});
    }
  }
}

// Whether m16 tile `i` of warp row `wm` has any of the tile's `valid_rows` rows (else the warp skips
// its mma: those outputs are never stored).
template <class T>
constexpr bool m16_active(int wm, int i, int valid_rows) {
  return (wm * T::kWarpM16 + i) * 16 < valid_rows;
}

// Shared-memory offset this lane passes to ldmatrix.x4 for the A fragment of m16 tile `i` of warp row
// `wm`, chunk `kk` of stage `stage` (a_ldsm: matrices rows 0-7 k 0-7, rows 8-15 k 0-7, rows 0-7
// k 8-15, rows 8-15 k 8-15 -> a[0], a[1], a[2], a[3], the register order of mma's A fragment).
template <class T>
constexpr int a_ldsm_off(const Layout<T>& lay, int stage, int lane, int wm, int i, int kk) {
  const RowCol rc = a_ldsm(lane);
  return lay.a_off(stage, (wm * T::kWarpM16 + i) * 16 + rc.row, kk * kMmaK + rc.col);
}

// Shared-memory offset this lane passes to ldmatrix for n8 tile j (x4: tiles j and j + 1) of warp
// column `wn`, chunk `kk` of stage `stage`.
template <class T>
constexpr int b_ldsm_off(const Layout<T>& lay, int stage, int lane, int wn, int j, int kk, bool x4) {
  const RowCol rc = b_ldsm(lane, x4);
  return lay.b_off(stage, (wn * T::kWarpN8 + j) * 8 + rc.row, kk * kMmaK + rc.col);
}

// Calls put(row, col, value) for each of this lane's accumulators (row, col within the CTA tile).
template <class T, class Acc, class Put>
SS_TC_DEV void for_each_acc(int lane, int wm, int wn, const Acc& acc, Put put) {
  SS_TC_UNROLL
  for (int i = 0; i < T::kWarpM16; ++i) SS_TC_UNROLL
  for (int j = 0; j < T::kWarpN8; ++j) SS_TC_UNROLL
  for (int e = 0; e < 4; ++e) {
    const RowCol rc = c_frag(lane, e >> 1);
    put((wm * T::kWarpM16 + i) * 16 + rc.row, (wn * T::kWarpN8 + j) * 8 + rc.col + (e & 1), acc[i][j][e]);
  }
}

// Stores this lane's accumulators of the warp's tiles (bounds-checked): the result when S == 1.
template <class T, class Acc>
SS_TC_DEV void store_tile(const Params& p, int64_t m0, int64_t n0, int lane, int wm, int wn, const Acc& acc) {
  for_each_acc<T>(lane, wm, wn, acc, [&](int r, int c, float v) {
    if (m0 + r < p.M && n0 + c < p.N) p.y[(m0 + r) * p.ldy + n0 + c] = v;
  });
}

// The share of a BM x BN output tile that the CTA of cluster rank `rank` (of S) reduces: elements
// e = r * BN + c of the row-major partial tiles, taken by thread tid of `threads` round robin; each
// y[m0 + r, n0 + c] in bounds becomes sum_slices(S, part(s, e)).
template <class Part>
SS_TC_DEV void reduce_tile(const Params& p, int64_t m0, int64_t n0, int bm, int bn, int rank, int tid, int threads,
                           Part part) {
  const int rows = p.M - m0 < bm ? static_cast<int>(p.M - m0) : bm;
  const int n = rows * bn, stride = p.S * threads;
  // kU elements per thread at a time, all their partials loaded before any is summed: loads from the
  // cluster's shared memory are slow, and one element's S loads alone leave the CTA waiting on each
  // round trip. The sums keep sum_slices' order (the same bits).
  constexpr int kU = 4;
  for (int e0 = rank * threads + tid; e0 < n; e0 += kU * stride) {
    float v[kU][kMaxSlices];
    SS_TC_UNROLL
    for (int u = 0; u < kU; ++u) {
      const int e = e0 + u * stride;
      SS_TC_UNROLL
      for (int s = 0; s < kMaxSlices; ++s) v[u][s] = e < n && s < p.S ? part(s, e) : 0.0f;
    }
    SS_TC_UNROLL
    for (int u = 0; u < kU; ++u) {
      const int e = e0 + u * stride, r = e / bn, c = e % bn;
      if (e >= n || n0 + c >= p.N) continue;
      p.y[(m0 + r) * p.ldy + n0 + c] = sum_slices(p.S, [&](int s) {
        float x = v[u][0];
        SS_TC_UNROLL
        for (int i = 1; i < kMaxSlices; ++i) x = s == i ? v[u][i] : x;  // no local-memory indexing
        return x;
      });
    }
  }
}

}  // namespace specserve::cuda::tc
