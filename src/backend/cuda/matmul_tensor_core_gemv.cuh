#pragma once
// The warp-split streaming tensor-core matmul for few rows (decode and short verify, 16 rows per CTA;
// matmul_tensor_core_gemv.cu): its shape, shared-memory layout and per-thread index code, plain C++
// that also compiles on the host so tests/backend_cuda/test_cuda_matmul_tc_emulation.cpp emulates it.
//
// Why not the first streaming kernel (removed in issue 31; git keeps it): it gave every K slice its own
// CTA and summed the slices through a thread-block cluster, so a 4096 x 4096 matrix ran as 512 short
// CTAs of 64 KB each (pipeline fill, cluster barrier and wave tail are a large share of ~20 µs). Here
// the 4 warps of a CTA split the slices of the SAME columns among themselves, each warp streaming its
// slices' weights back to back through a private ring (no CTA barrier in the main loop), and the CTA
// sums the slices from shared memory at the end: no cluster, a quarter of the CTAs, each 4x longer.
//
// With S slices (k_split) and W warps a CTA (4; the fp8 kernel's f32-x form has 8): wpc = min(S, W) warps per
// 16-column group, W / wpc groups per CTA (CTA = 16 * W / wpc columns), and warp w takes group w / wpc and the
// spw = ceil(S / wpc) consecutive
// slices from (w % wpc) * spw, i.e. one contiguous run of chunks, with one accumulator chain per
// slice (at most 2). Each warp loads its own x rows with its weight tile (f32, rounded while the A
// fragments are built). Numerics: the contract of matmul_tensor_core.cu (same chunks, slices, mma,
// sum_slices order), so a row's bits are those of the other kernels.
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_rows.cuh"

namespace specserve::cuda::tc {

// Xb: x comes from its bf16 copy (matmul_tensor_core_xb.cuh: 16 rows per CTA row, whole pieces) and
// the A fragments by ldmatrix, as for verify's 5-16 rows; else from f32 x, rounded per fragment.
template <int Stages, bool Xb = false, int Warps = 4>
struct Gemv {
  static constexpr bool kXb = Xb;
  static constexpr int kWarps = Warps, kThreads = 32 * kWarps;
  static constexpr int kBM = 16;          // x rows per CTA row (blockIdx.y)
  static constexpr int kWarpN = 16;       // columns per warp (two n8 tiles)
  static constexpr int kBN = 16 * Warps;  // the widest CTA (S = 1); make_gemv_params counts CTAs by gemv_shape
  static constexpr int kKT = 128;         // k per stage
  static constexpr int kStages = Stages;
  static constexpr int kSB = kKT + 8;  // bf16 pitch: ldmatrix rows in 8 distinct bank groups
  static constexpr int kSA = kKT + 8;  // f32 pitch: conflict-free 8-byte A reads
  static constexpr int kMaxSlicesPerWarp = 2;
  static_assert(Stages >= 2, "at least double buffering");
  static_assert(Warps == 4 || Warps == 8, "4 or 8 warps: a power of two that divides by every S up to 4");
  static_assert((kMaxSlices + kWarps - 1) / kWarps <= kMaxSlicesPerWarp, "a warp holds at most 2 chains");
};

// How a CTA's warps share out S slices (see the header comment).
struct GemvShape {
  int wpc = 1;     // warps per 16-column group
  int groups = 4;  // column groups per CTA
  int spw = 1;     // slices per warp
  constexpr int columns() const { return 16 * groups; }
};
constexpr GemvShape gemv_shape(int S, int warps = 4) {
  const int wpc = S < warps ? S : warps;
  return GemvShape{wpc, warps / wpc, (S + wpc - 1) / wpc};
}

// The chunks [begin, end) a warp streams (all inside its slices) and `split`, the first chunk of its
// second slice (end when it has one slice): chunks below split feed chain 0, the others chain 1.
struct GemvWork {
  int group = 0, first_slice = 0, slices = 0;
  int64_t begin = 0, split = 0, end = 0;
  constexpr int64_t tiles(int kt) const { return ceil_div((end - begin) * kMmaK, kt); }
};
constexpr GemvWork gemv_work(const Params& p, int warp, int warps = 4) {
  const GemvShape g = gemv_shape(p.S, warps);
  GemvWork w;
  w.group = warp / g.wpc;
  w.first_slice = (warp % g.wpc) * g.spw;
  const int last = w.first_slice + g.spw < p.S ? w.first_slice + g.spw : p.S;
  w.slices = last > w.first_slice && w.group < g.groups ? last - w.first_slice : 0;
  if (w.slices == 0) return w;
  const auto clamp = [&](int64_t c) { return c < p.chunks ? c : p.chunks; };
  w.begin = clamp(w.first_slice * p.cps);
  w.split = clamp((w.first_slice + 1) * p.cps);
  w.end = clamp(int64_t{last} * p.cps);
  return w;
}

// Byte offsets in the dynamic shared memory: per warp, kStages stages of [w: 16 rows x kSB bf16]
// [x: x_rows x kSA f32, or with Xb 16 rows x kSB bf16]. After the main loop the same bytes hold the partial tiles for S
// > 1: part(group, slice, row, col) f32.
template <class G>
struct GemvLayout {
  int x_rows = 0;  // min(16, M)
  static constexpr int w_bytes() { return G::kWarpN * G::kSB * 2; }
  constexpr int stage_bytes() const { return w_bytes() + (G::kXb ? w_bytes() : x_rows * G::kSA * 4); }
  constexpr int w_off(int warp, int stage, int n, int k) const {
    return (warp * G::kStages + stage) * stage_bytes() + (n * G::kSB + k) * 2;
  }
  constexpr int x_off(int warp, int stage, int row, int k) const {
    return (warp * G::kStages + stage) * stage_bytes() + w_bytes() +
           (G::kXb ? (row * G::kSB + k) * 2 : (row * G::kSA + k) * 4);
  }
  static constexpr int part_off(int S, int group, int slice, int row, int col) {
    return (((group * S + slice) * G::kBM + row) * G::kWarpN + col) * 4;
  }
  constexpr int smem_bytes(int S) const {
    const int stages = G::kWarps * G::kStages * stage_bytes();
    const int parts = S > 1 ? part_off(S, gemv_shape(S, G::kWarps).groups, 0, 0, 0) : 0;
    return stages > parts ? stages : parts;
  }
};

// The Params of a launch (host code; the launcher and the emulation share it): nbn counts CTAs of
// gemv_shape(S).columns() columns, nbm blocks of 16 rows, a_rows = min(16, M).
template <class G>
inline Params make_gemv_params(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                               int64_t M, int64_t N, int64_t K) {
  Params p = make_params<G>(x, ldx, w, ldw, y, ldy, M, N, K);
  p.nbn = ceil_div(N, gemv_shape(p.S, G::kWarps).columns());
  p.group = 1;
  return p;
}

// The Params of a gemv launch over `count` weights sharing x, M, K and the split (make_multi_params).
template <class G>
inline Params make_gemv_multi_params(const float* x, int64_t ldx, int64_t M, int64_t K, const WeightPart* parts,
                                     int count) {
  return make_multi_params(parts, count, [&](const WeightPart& w) {
    return make_gemv_params<G>(x, ldx, w.w, w.ldw, w.y, w.ldy, M, w.N, K);
  });
}

// Weight tile t of a warp's run (from k = 16 * work.begin) and its x rows into stage t % kStages.
template <class G, class Cp16X, class Cp16W, class StF32, class StB16>
SS_TC_DEV void gemv_load_stage(const Params& p, const GemvLayout<G>& lay, const GemvWork& work, int warp, int64_t n0w,
                               int64_t m0, int64_t t, int lane, Cp16X cp16_x, Cp16W cp16_w, StF32 st_f32,
                               StB16 st_b16) {
  const int stage = static_cast<int>(t % G::kStages);
  const int64_t k0 = work.begin * kMmaK + t * G::kKT;
  if constexpr (G::kXb) {
    // The copy covers every tile a slice loads, zero past M and K: whole pieces, 16 rows.
    SS_TC_UNROLL
    for (int i = 0; i < 8; ++i) {
      const int r = lane / 16 + 2 * i, c = (lane % 16) * 8;
      cp16_x(lay.x_off(warp, stage, r, c), p.xb + (m0 + r) * p.ldxb + k0 + c, 16);
    }
  } else {
    load_x_rows(
        p, m0, k0, G::kKT, lane, 32, [&](int r, int c) { return lay.x_off(warp, stage, r, c); }, cp16_x, st_f32);
  }
  load_w_rows16<G::kKT>(
      p, n0w, k0, lane, [&](int r, int c) { return lay.w_off(warp, stage, r, c); }, cp16_w, st_b16);
}

// A lane's offsets, computed once per warp so that the main loop only adds the stage, tile and chunk:
// the loop is issue-bound otherwise (ncu: ~700 instructions per 4 KB weight tile with the offsets
// recomputed per piece and per fragment register, 58 % issue-active at 65 % of the DRAM bandwidth).
struct GemvLane {
  int b_off = 0;        // ldmatrix.x4 address (B fragments of the two n8 tiles) of chunk 0, stage 0
  int a_off[4] = {};    // A fragment register r: the f32 pair of chunk 0, stage 0
  uint32_t a_rows = 0;  // bit r: register r's row is below valid_rows (else the register is zero)
  int w_dst = 0;        // whole tiles: this lane's first weight piece (row lane / 16, k (lane % 16) * 8), stage 0
  int64_t w_src = 0;    // ... and its element offset in w at the warp's first tile
  int x_dst = 0;        // whole tiles: this lane's x piece of row 0 (k 4 * lane), stage 0 (Xb: as w_dst)
  int64_t x_src = 0;    // ... and its element offset in x (Xb: in the copy) at the warp's first tile
};
template <class G>
constexpr GemvLane gemv_lane(const Params& p, const GemvLayout<G>& lay, const GemvWork& work, int warp, int lane,
                             int64_t n0w, int64_t m0, int valid_rows) {
  static_assert(G::kKT == 128, "whole tiles: 8 weight pieces and one x piece per lane and row");
  GemvLane l;
  const RowCol b = b_ldsm(lane, true);
  l.b_off = lay.w_off(warp, 0, b.row, b.col);
  if constexpr (G::kXb) {
    const RowCol a = a_ldsm(lane);  // one ldmatrix.x4: a[0..3]
    l.a_off[0] = lay.x_off(warp, 0, a.row, a.col);
  } else {
    for (int r = 0; r < 4; ++r) {
      const RowCol a = a_frag(lane, r);
      l.a_off[r] = lay.x_off(warp, 0, a.row, a.col);
      if (a.row < valid_rows) l.a_rows |= 1u << r;
    }
  }
  l.w_dst = lay.w_off(warp, 0, lane / 16, (lane % 16) * 8);
  l.w_src = (n0w + lane / 16) * p.ldw + work.begin * kMmaK + (lane % 16) * 8;
  if constexpr (G::kXb) {
    l.x_dst = lay.x_off(warp, 0, lane / 16, (lane % 16) * 8);
    l.x_src = (m0 + lane / 16) * p.ldxb + work.begin * kMmaK + (lane % 16) * 8;
  } else {
    l.x_dst = lay.x_off(warp, 0, 0, 4 * lane);
    l.x_src = m0 * p.ldx + work.begin * kMmaK + 4 * lane;
  }
  return l;
}

// Whether tile t of the warp is whole: 16-byte loads, all 16 weight rows below N and all 128 k below
// K. Whole tiles take gemv_load_whole (no per-piece bounds), the others gemv_load_stage; same bytes.
template <class G>
constexpr bool gemv_tile_whole(const Params& p, const GemvWork& work, int64_t n0w, int64_t t) {
  return p.vec_w && (G::kXb || p.vec_x) && n0w + G::kWarpN <= p.N && work.begin * kMmaK + (t + 1) * G::kKT <= p.K;
}

// A whole tile t: 8 weight pieces per lane (rows lane / 16 + 2i) and one x piece per lane per row
// (Xb: 8 pieces per lane, as the weights). The weight half and the x half can be issued apart: the
// kernel issues its first tiles' weights before waiting for the previous kernel (x is that kernel's
// output; the weights are not).
//   cp_w / cp_x(smem_off, src): a 16-byte cp.async
template <class G, class CpW>
SS_TC_DEV void gemv_load_whole_w(const Params& p, const GemvLayout<G>& lay, const GemvLane& l, int64_t t, CpW cp_w) {
  const int sb = static_cast<int>(t % G::kStages) * lay.stage_bytes();
  const uint16_t* w = p.w + l.w_src + t * G::kKT;
  SS_TC_UNROLL
  for (int i = 0; i < 8; ++i) cp_w(l.w_dst + sb + 2 * i * G::kSB * 2, w + 2 * i * p.ldw);
}
template <class G, class CpX>
SS_TC_DEV void gemv_load_whole_x(const Params& p, const GemvLayout<G>& lay, const GemvLane& l, int valid_rows,
                                 int64_t t, CpX cp_x) {
  const int sb = static_cast<int>(t % G::kStages) * lay.stage_bytes();
  if constexpr (G::kXb) {
    const uint16_t* x = p.xb + l.x_src + t * G::kKT;
    SS_TC_UNROLL
    for (int i = 0; i < 8; ++i) cp_x(l.x_dst + sb + 2 * i * G::kSB * 2, x + 2 * i * p.ldxb);
  } else {
    const float* x = p.x + l.x_src + t * G::kKT;
    for (int r = 0; r < valid_rows; ++r) cp_x(l.x_dst + sb + r * G::kSA * 4, x + r * p.ldx);
  }
}
template <class G, class CpX, class CpW>
SS_TC_DEV void gemv_load_whole(const Params& p, const GemvLayout<G>& lay, const GemvLane& l, int valid_rows, int64_t t,
                               CpX cp_x, CpW cp_w) {
  gemv_load_whole_w<G>(p, lay, l, t, cp_w);
  gemv_load_whole_x<G>(p, lay, l, valid_rows, t, cp_x);
}

// Chunk kk of stage `stage`: the B fragments' ldmatrix address and the A fragment (rounded by cvt2).
template <class G>
constexpr int gemv_b_off(const GemvLayout<G>& lay, const GemvLane& l, int stage, int kk) {
  return l.b_off + stage * lay.stage_bytes() + kk * kMmaK * 2;
}
//   Xb: ldsm(off, a) loads the four registers by ldmatrix.x4; else cvt2(off) rounds an f32 pair.
template <class G, class Cvt2, class Ldsm>
SS_TC_DEV void gemv_gather_a(const GemvLayout<G>& lay, const GemvLane& l, int stage, int kk, uint32_t (&a)[4],
                             Cvt2 cvt2, Ldsm ldsm) {
  if constexpr (G::kXb) {
    ldsm(l.a_off[0] + stage * lay.stage_bytes() + kk * kMmaK * 2, a);
    return;
  }
  const int base = stage * lay.stage_bytes() + kk * kMmaK * 4;
  SS_TC_UNROLL
  for (int r = 0; r < 4; ++r) a[r] = (l.a_rows >> r) & 1u ? cvt2(l.a_off[r] + base) : 0u;
}

// Calls put(row, col, value) for this lane's accumulators of one chain (row, col within the warp's
// 16 x 16 tile).
template <class Acc, class Put>
SS_TC_DEV void gemv_for_each_acc(int lane, const Acc& acc, Put put) {
  SS_TC_UNROLL
  for (int j = 0; j < 2; ++j) SS_TC_UNROLL
  for (int e = 0; e < 4; ++e) {
    const RowCol rc = c_frag(lane, e >> 1);
    put(rc.row, j * 8 + rc.col + (e & 1), acc[j][e]);
  }
}

// The sum of the S partials of each output of the CTA (columns n0 .. n0 + columns - 1, rows m0 ..
// m0 + valid_rows - 1) in slice order, read through part(byte offset); thread tid of kThreads takes
// elements round robin, one thread per element.
template <class G, class Part>
SS_TC_DEV void gemv_reduce(const Params& p, int64_t m0, int64_t n0, int valid_rows, int tid, Part part) {
  const GemvShape g = gemv_shape(p.S, G::kWarps);
  for (int e = tid; e < g.groups * valid_rows * G::kWarpN; e += G::kThreads) {
    const int group = e / (valid_rows * G::kWarpN), r = e / G::kWarpN % valid_rows, c = e % G::kWarpN;
    const int64_t n = n0 + group * G::kWarpN + c;
    if (n >= p.N) continue;
    p.y[(m0 + r) * p.ldy + n] =
        sum_slices(p.S, [&](int s) { return part(GemvLayout<G>::part_off(p.S, group, s, r, c)); });
  }
}

}  // namespace specserve::cuda::tc
