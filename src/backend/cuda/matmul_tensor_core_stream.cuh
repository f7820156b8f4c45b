#pragma once
// The streaming tensor-core matmul for few rows (decode and short verify, M <= 16 per CTA row;
// matmul_tensor_core_stream.cu): its shape, shared-memory layout and per-thread index code, plain C++
// that also compiles on the host so tests/backend_cuda/test_cuda_matmul_tensor_core.cpp emulates it.
//
// A CTA (4 warps) computes 16 rows x 64 columns of y over ONE K slice (k_split): blockIdx.x =
// column block * S + slice, blockIdx.y = block of 16 rows. Each warp owns 16 columns (two n8 tiles,
// two independent mma chains) and streams its own weight rows through a warp-private ring of kStages
// stages of 128 k (cp.async, waited on with __syncwarp only: no CTA barrier per weight tile). The x
// rows of the slice come through a CTA-shared, double-buffered window of 256 k (f32, rounded to bf16
// while the A fragments are built, as in the tiled kernel), so the CTA meets at a barrier once per
// two weight tiles. Numerics: the contract of matmul_tensor_core.cu (same chunks, same slices, same
// mma, same sum_slices order), so a row's bits are those of the tiled kernel.
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_rows.cuh"

namespace specserve::cuda::tc {

struct Stream {
  static constexpr int kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int kBM = 16;                // x rows per CTA
  static constexpr int kWarpN = 16;             // columns per warp
  static constexpr int kBN = kWarps * kWarpN;   // columns per CTA
  static constexpr int kKT = 128;               // k per weight stage
  static constexpr int kStages = 3;             // weight stages per warp (two in flight while one is used)
  static constexpr int kXTiles = 2;             // weight tiles per x window
  static constexpr int kXW = kKT * kXTiles;     // k per x window
  static constexpr int kSB = kKT + 8;           // bf16 pitch: ldmatrix rows in 8 distinct bank groups
  static constexpr int kSA = kXW + 8;           // f32 pitch: conflict-free 8-byte A reads (as Tile::kSA)
  static_assert(kBN == kSplitColumns, "k_split counts streaming CTAs");
  // Window v + 2 (same buffer as v) is loaded with weight tile 2v + 4, issued at iteration
  // 2v + 4 - (kStages - 1) >= 2v + 2, i.e. after the barrier of window v + 1, which every warp reaches
  // only once it is done with window v.
  static_assert(kStages - 1 <= kXTiles, "an x buffer is refilled only after the barrier that frees it");
};

// Byte offsets in the dynamic shared memory: [weights: kWarps x kStages x 16 rows x kSB bf16]
// [x: 2 windows x x_rows x kSA f32][partial tile when S > 1: kBM x kBN f32].
struct StreamLayout {
  int x_rows = 0;  // min(16, M)
  static constexpr int w_stage_bytes() { return Stream::kWarpN * Stream::kSB * 2; }
  static constexpr int x_base() { return Stream::kWarps * Stream::kStages * w_stage_bytes(); }
  constexpr int w_off(int warp, int stage, int n, int k) const {
    return (warp * Stream::kStages + stage) * w_stage_bytes() + (n * Stream::kSB + k) * 2;
  }
  constexpr int x_off(int buf, int row, int k) const { return x_base() + ((buf * x_rows + row) * Stream::kSA + k) * 4; }
  constexpr int part_off() const { return x_base() + 2 * x_rows * Stream::kSA * 4; }
  constexpr int smem_bytes(int S) const { return part_off() + (S > 1 ? Stream::kBM * Stream::kBN * 4 : 0); }
};

// The Params of a streaming launch (host code; the launcher and the emulation share it): a_rows =
// min(16, M), nbm = blocks of 16 rows (blockIdx.y), nbn = blocks of 64 columns.
inline Params make_stream_params(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                                 int64_t M, int64_t N, int64_t K) {
  Params p = make_params<Stream>(x, ldx, w, ldw, y, ldy, M, N, K);
  p.group = 1;
  return p;
}

// The weight tile from k0 of the warp's 16 rows (from n0w) into its stage `stage` (load_w_rows16).
template <class Cp16W, class StB16>
SS_TC_DEV void stream_load_w(const Params& p, const StreamLayout& lay, int warp, int stage, int64_t n0w, int64_t k0,
                             int lane, Cp16W cp16_w, StB16 st_b16) {
  load_w_rows16<Stream::kKT>(p, n0w, k0, lane, [&](int r, int c) { return lay.w_off(warp, stage, r, c); }, cp16_w,
                             st_b16);
}

// The x window from k0 of the CTA's rows m0 .. m0 + min(16, M - m0) - 1 into buffer `buf`; all threads
// of the CTA take pieces round robin (load_x_rows).
template <class Cp16X, class StF32>
SS_TC_DEV void stream_load_x(const Params& p, const StreamLayout& lay, int buf, int64_t m0, int64_t k0, int tid,
                             Cp16X cp16_x, StF32 st_f32) {
  load_x_rows(p, m0, k0, Stream::kXW, tid, Stream::kThreads, [&](int r, int c) { return lay.x_off(buf, r, c); },
              cp16_x, st_f32);
}

// The A fragment of the chunk at k offset `kw` of window buffer `buf` (gather_a_f32).
template <class Cvt2>
SS_TC_DEV void stream_gather_a(const StreamLayout& lay, int buf, int lane, int kw, int valid_rows, uint32_t (&a)[4],
                               Cvt2 cvt2) {
  gather_a_f32(lane, valid_rows, [&](int r, int c) { return lay.x_off(buf, r, kw + c); }, a, cvt2);
}

// This lane's ldmatrix.x4 address for chunk kk of the warp's stage: the B fragments of its two n8 tiles.
constexpr int stream_b_off(const StreamLayout& lay, int warp, int stage, int lane, int kk) {
  const RowCol rc = b_ldsm(lane, true);
  return lay.w_off(warp, stage, rc.row, kk * kMmaK + rc.col);
}

// Calls put(row, col, value) for this lane's accumulators (row, col within the 16 x 64 CTA tile).
template <class Acc, class Put>
SS_TC_DEV void stream_for_each_acc(int lane, int warp, const Acc& acc, Put put) {
SS_TC_UNROLL
  for (int j = 0; j < 2; ++j)
SS_TC_UNROLL
    for (int e = 0; e < 4; ++e) {
      const RowCol rc = c_frag(lane, e >> 1);
      put(rc.row, warp * Stream::kWarpN + j * 8 + rc.col + (e & 1), acc[j][e]);
    }
}

}  // namespace specserve::cuda::tc
