// The bf16 tensor-core matmul's index code on the host (no GPU needed; tc_emulation.h runs it):
// matmul_tensor_core_xb.cuh (the bf16 copy of x), matmul_tensor_core.cuh (stage loads, ldmatrix
// addresses, stores, tile order, K slices and their fixed-order sum) and matmul_tensor_core_gemv.cuh (the
// streaming kernel) run for every tile shape against the contract's reference, and the tiled and
// streaming emulations bit-identical to each other; the wgmma
// kernel's shared-memory image and shape choice (matmul_wgmma.cuh).
#include <algorithm>
#include <vector>

#include "backend/cuda/matmul_wgmma.cuh"
#include "tc_emulation.h"
#include "tc_reference.h"

namespace specserve::cuda_test {
namespace {

namespace wg = cuda::wg;

template <class T>
void emulate_case(int64_t M, int64_t N, int64_t K, int64_t pad_x, int64_t pad_w, int64_t pad_y, int x_off, int w_off,
                  bool force_scalar) {
  const int64_t ldx = K + pad_x, ldw = K + pad_w, ldy = N + pad_y;
  std::string what;
  for (int64_t v : {M, N, K, ldx, ldw, ldy, int64_t{x_off}, int64_t{w_off}, int64_t{T::kBM}, int64_t{T::kBN},
                    int64_t{tc::k_split(N, K).S}})
    what += std::to_string(v) + " ";
  what = "M N K ldx ldw ldy x_off w_off BM BN S = " + what + (force_scalar ? "scalar" : "");
  auto xs = randn(size_t((M - 1) * ldx + K + x_off), uint32_t(M * 31 + K));
  auto ws = to_bf16(randn(size_t((N - 1) * ldw + K + w_off), uint32_t(N * 17 + K), 0.05f));
  const float sentinel = std::bit_cast<float>(0x7fc0beefu);
  std::vector<float> y(size_t((M - 1) * ldy + N + 3), sentinel);
  const float* x = xs.data() + x_off;
  const uint16_t* w = ws.data() + w_off;
  Fault f;
  emulate_into<T>(x, ldx, w, ldw, y.data(), ldy, M, N, K, force_scalar, xs.data() + xs.size(), ws.data() + ws.size(),
                  f);
  ASSERT_EQ(f.count, 0) << f.first << " (" << what << ")";
  const auto ref = reference(x, ldx, w, ldw, M, N, K);
  double diff = 0, scale = 1e-30;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < ldy && m * ldy + n < int64_t(y.size()); ++n) {
      const float v = y[size_t(m * ldy + n)];
      if (n >= N) {
        ASSERT_EQ(std::bit_cast<uint32_t>(v), 0x7fc0beefu) << "wrote padding at " << m << ", " << n << " " << what;
        continue;
      }
      ASSERT_TRUE(std::isfinite(v)) << "y[" << m << ", " << n << "] = " << v << " (" << what << ")";
      diff = std::max(diff, std::fabs(double(v) - ref[size_t(m * N + n)]));
      scale = std::max(scale, std::fabs(double(ref[size_t(m * N + n)])));
    }
  EXPECT_LT(diff / scale, 1e-5) << what;
}

template <class T>
void emulate_shapes() {
  const int64_t BM = T::kBM, BN = T::kBN, KT = T::kKT;
  const std::array<std::array<int64_t, 3>, 10> shapes = {{{1, 8, 16},
                                                          {1, 37, 1},
                                                          {3, 41, 300},
                                                          {BM, BN, KT},
                                                          {BM - 1, BN + 1, KT + 1},
                                                          {BM + 1, 2 * BN + 5, 2 * KT + 17},
                                                          {2 * BM + 3, 3, 5},
                                                          {5, 2 * BN + 3, T::kStages * KT + 40},
                                                          {2, 70, 1032},   // S = 4, a short last slice
                                                          {1, 9, 4104}}};  // S = 8, K % 16 == 8
  for (const auto& s : shapes) {
    emulate_case<T>(s[0], s[1], s[2], 0, 0, 0, 0, 0, false);  // contiguous (vector loads iff K allows)
    emulate_case<T>(s[0], s[1], s[2], 4 - s[2] % 4, 8 - s[2] % 8, 3, 0, 0, false);  // padded rows: vector loads
    emulate_case<T>(s[0], s[1], s[2], 4 - s[2] % 4, 8 - s[2] % 8, 3, 0, 0, true);   // the same on the scalar path
    emulate_case<T>(s[0], s[1], s[2], 1, 3, 0, 1, 1, false);                        // misaligned: scalar loads
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(TcEmulation, TileM16) { emulate_shapes<tc::TileM16>(); }
TEST(TcEmulation, TileM16N8) { emulate_shapes<tc::TileM16N8>(); }
TEST(TcEmulation, TileM32N32) { emulate_shapes<tc::TileM32N32>(); }
TEST(TcEmulation, TileM32) { emulate_shapes<tc::TileM32>(); }
TEST(TcEmulation, TileM64N32) { emulate_shapes<tc::TileM64N32>(); }
TEST(TcEmulation, TileM64N64) { emulate_shapes<tc::TileM64N64>(); }
TEST(TcEmulation, TileM64) { emulate_shapes<tc::TileM64>(); }
TEST(TcEmulation, TileM128N64) { emulate_shapes<tc::TileM128N64>(); }
TEST(TcEmulation, TileM128) { emulate_shapes<tc::TileM128>(); }
TEST(TcEmulation, Gemv) { emulate_shapes<tc::Gemv<4>>(); }
TEST(TcEmulation, Gemv3Stages) { emulate_shapes<tc::Gemv<3>>(); }
TEST(TcEmulation, Gemv5Stages) { emulate_shapes<tc::Gemv<5>>(); }
TEST(TcEmulation, GemvBf16X) { emulate_shapes<tc::Gemv<3, true>>(); }
TEST(TcEmulation, Gemv2Stages) { emulate_shapes<tc::Gemv<2>>(); }
TEST(TcEmulation, GemvBf16X2Stages) { emulate_shapes<tc::Gemv<2, true>>(); }

// How the warp-split kernel shares out the slices: every chunk of every slice streamed by exactly one
// warp of the CTA, each warp's run one or two whole slices, and the CTA widths of the decode shapes.
TEST(TcEmulation, GemvWorkCoversEverySliceOnce) {
  for (int64_t N : {1, 1024, 4096, 24576, 151936})
    for (int64_t K : {3, 300, 1001, 1032, 4096, 4104, 5120, 12288, 17408}) {
      tc::Params p = tc::make_gemv_params<tc::Gemv<4>>(nullptr, K, nullptr, K, nullptr, N, 1, N, K);
      const tc::GemvShape g = tc::gemv_shape(p.S);
      for (int group = 0; group < g.groups; ++group) {
        int64_t next = 0;
        int next_slice = 0;
        for (int warp = 0; warp < 4; ++warp) {
          const tc::GemvWork w = tc::gemv_work(p, warp);
          if (w.group != group || w.slices == 0) continue;
          ASSERT_EQ(w.first_slice, next_slice) << N << " " << K << " warp " << warp;
          ASSERT_EQ(w.begin, next) << N << " " << K << " warp " << warp;
          ASSERT_EQ(w.begin, tc::slice_of(p, w.first_slice).begin);
          ASSERT_EQ(w.split, tc::slice_of(p, w.first_slice).end);
          ASSERT_EQ(w.end, tc::slice_of(p, w.first_slice + w.slices - 1).end);
          next = w.end;
          next_slice += w.slices;
        }
        ASSERT_EQ(next, p.chunks) << N << " " << K << " group " << group;
        ASSERT_EQ(next_slice, p.S);
      }
    }
  EXPECT_EQ(tc::gemv_shape(tc::k_split(4096, 4096).S).columns(), 16);    // S = 8: 2 slices per warp
  EXPECT_EQ(tc::gemv_shape(tc::k_split(24576, 4096).S).columns(), 32);   // S = 2
  EXPECT_EQ(tc::gemv_shape(tc::k_split(151936, 4096).S).columns(), 64);  // S = 1
}

// A launch over several weights (matmul_multi: q/k/v, gate/up) as segments, at 1-32 rows (one and two
// 16-row blocks per column block, f32 and bf16 x): every output's bits equal its lone launch's.
template <class G>
void gemv_segments_equal_lone_launches() {
  const int64_t K = 1032;
  const std::array<int64_t, 3> widths = {70, 40, 130};  // all S = 2 at this K
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (int64_t n : widths) {
    ASSERT_EQ(tc::k_split(n, K).S, tc::k_split(widths[0], K).S);
    offsets.push_back(total);
    total += n * K;
  }
  const auto w = to_bf16(randn(size_t(total), 41, 0.05f));  // the three weights, one after another
  for (int64_t M : {1, 5, 16, 24, 32}) {
    const auto x = randn(size_t(M * K), 42 + uint32_t(M));
    std::vector<std::vector<float>> multi, lone;
    std::array<tc::WeightPart, 3> parts;
    for (size_t i = 0; i < widths.size(); ++i) {
      multi.emplace_back(size_t(M * widths[i]), NAN);
      lone.emplace_back(size_t(M * widths[i]), NAN);
      parts[i] = {w.data() + offsets[i], K, multi.back().data(), widths[i], widths[i]};
    }
    tc::Params p = tc::make_gemv_multi_params<G>(x.data(), K, M, K, parts.data(), int(parts.size()));
    ASSERT_EQ(p.segments, 3);
    std::vector<uint16_t> xb;
    if constexpr (G::kXb) {
      p.ldxb = tc::xb_pitch(K, G::kKT);
      xb = emulate_xb(x.data(), K, M, K, p.ldxb);
      p.xb = xb.data();
    }
    Fault f;
    emulate_gemv<G>(p, x.data() + x.size(), xb.data() + xb.size(), w.data() + w.size(), f);
    for (size_t i = 0; i < widths.size(); ++i) {
      emulate_into<G>(x.data(), K, w.data() + offsets[i], K, lone[i].data(), widths[i], M, widths[i], K, false,
                      x.data() + x.size(), w.data() + w.size(), f);
      ASSERT_TRUE(bit_equal(multi[i].data(), lone[i].data(), multi[i].size())) << "weight " << i << ", M " << M;
    }
    ASSERT_EQ(f.count, 0) << f.first;
  }
}
TEST(TcEmulation, GemvSegmentsEqualLoneLaunches) { gemv_segments_equal_lone_launches<tc::Gemv<3>>(); }
TEST(TcEmulation, GemvSegmentsEqualLoneLaunchesBf16X) { gemv_segments_equal_lone_launches<tc::Gemv<3, true>>(); }
TEST(TcEmulation, GemvSegmentsEqualLoneLaunches2Stages) { gemv_segments_equal_lone_launches<tc::Gemv<2>>(); }

// The K split: a function of (N, K) alone, S in {1, 2, 4, 8}, slices of whole chunks that cover
// every chunk once, none empty; and the values the decode shapes get.
TEST(TcEmulation, KSplitCoversEveryChunkOnce) {
  for (int64_t N : {1, 8, 257, 1000, 1024, 3072, 4096, 5120, 17408, 24576, 151936})
    for (int64_t K : {1, 3, 16, 17, 300, 511, 512, 1001, 1032, 2048, 4096, 4104, 5120, 12288, 17408}) {
      const tc::KSplit ks = tc::k_split(N, K);
      ASSERT_TRUE(ks.S == 1 || ks.S == 2 || ks.S == 4 || ks.S == 8) << N << " " << K;
      tc::Params p;
      p.chunks = tc::ceil_div(K, tc::kMmaK);
      p.S = ks.S;
      p.cps = ks.cps;
      int64_t next = 0;
      for (int s = 0; s < ks.S; ++s) {
        const tc::Slice sl = tc::slice_of(p, s);
        ASSERT_EQ(sl.begin, next) << N << " " << K << " slice " << s;
        ASSERT_LT(sl.begin, sl.end) << N << " " << K << " slice " << s;
        next = sl.end;
      }
      ASSERT_EQ(next, p.chunks) << N << " " << K;
    }
  EXPECT_EQ(tc::k_split(4096, 4096).S, 8);
  EXPECT_EQ(tc::k_split(4096, 12288).S, 8);
  EXPECT_EQ(tc::k_split(24576, 4096).S, 2);
  EXPECT_EQ(tc::k_split(151936, 4096).S, 1);
  EXPECT_EQ(tc::k_split(5120, 5120).S, 8);
  EXPECT_EQ(tc::k_split(17408, 5120).S, 2);
  EXPECT_EQ(tc::k_split(257, 1001).S, 2);   // 63 chunks: slices of 32 and 31
  EXPECT_EQ(tc::k_split(1000, 4104).S, 8);  // 257 chunks: 7 slices of 33 and one of 26
}

// The slice-serial kernel's K tiles (wg::serial_tile): in slice order, each slice's chunks covered once
// in increasing order by tiles of up to 4 chunks that never cross the slice's end, the last tile of
// each slice marked, and as many tiles as serial_tiles says.
TEST(TcEmulation, SerialTilesWalkEverySliceInOrder) {
  for (int64_t N : {8, 257, 1000, 4096, 17408, 151936})
    for (int64_t K : {8, 16, 24, 296, 1000, 1032, 4096, 4104, 5120, 12288, 17408}) {
      const tc::KSplit ks = tc::k_split(N, K);
      tc::Params p;
      p.chunks = tc::ceil_div(K, tc::kMmaK);
      p.S = ks.S;
      p.cps = ks.cps;
      const int64_t tiles = wg::serial_tiles(p.chunks, p.cps);
      int64_t slice = 0, next = 0, g = 0;
      for (; g < tiles; ++g) {
        const wg::SerialTile t = wg::serial_tile(g, p.chunks, p.cps);
        const tc::Slice sl = tc::slice_of(p, slice);
        ASSERT_EQ(t.slice, slice) << N << " " << K << " tile " << g;
        ASSERT_EQ(t.chunk0, next) << N << " " << K << " tile " << g;
        ASSERT_EQ(t.chunk_end, sl.end) << N << " " << K << " tile " << g;
        const int64_t end = std::min(t.chunk0 + wg::kKT / tc::kMmaK, sl.end);
        ASSERT_EQ(t.last_of_slice, end == sl.end) << N << " " << K << " tile " << g;
        next = end;
        if (t.last_of_slice) ++slice;
      }
      ASSERT_EQ(slice, ks.S) << N << " " << K;
      ASSERT_EQ(next, p.chunks) << N << " " << K;
    }
}

// On the host the emulated mma gives an element's bits from its own row and column alone, so any
// difference between kernels, tile shapes, batch sizes or fragment rows is in the index code: the
// slices, their order, or the sum. Every row of a batch equals the row alone, in every kernel.
template <class T>
std::vector<float> emulated(const std::vector<float>& x, const std::vector<uint16_t>& w, int64_t first, int64_t M,
                            int64_t N, int64_t K, Fault& f) {
  std::vector<float> y(size_t(M * N), NAN);
  emulate_into<T>(x.data() + first * K, K, w.data(), K, y.data(), N, M, N, K, false, x.data() + x.size(),
                  w.data() + w.size(), f);
  return y;
}

// Shapes: S = 2 (70 x 1032), S = 8 with K % 16 == 8 (40 x 4104), S = 1 with odd K (33 x 1001). Batches
// of 17 .. 256 rows (the verify sizes) in the shapes the launcher picks for them, and forced others.
TEST(TcEmulation, RowsAloneEqualRowsInBatchesAcrossKernels) {
  for (auto [N, K] : {std::pair<int64_t, int64_t>{70, 1032}, {40, 4104}, {33, 1001}}) {
    const int64_t rows = 256 + 13;
    const auto x = randn(size_t(rows * K), 3 + uint32_t(K));
    const auto w = to_bf16(randn(size_t(N * K), 4 + uint32_t(N), 0.05f));
    Fault f;
    std::vector<std::vector<float>> alone;
    for (int64_t m = 0; m < rows; ++m)
      alone.push_back(m % 2 ? emulated<tc::Gemv<2>>(x, w, m, 1, N, K, f) : emulated<tc::Gemv<3>>(x, w, m, 1, N, K, f));
    auto expect_rows = [&](const std::vector<float>& y, int64_t first, int64_t M, const char* what) {
      for (int64_t m = 0; m < M; ++m)
        ASSERT_TRUE(bit_equal(y.data() + m * N, alone[size_t(first + m)].data(), size_t(N)))
            << what << ": row " << first + m << " of M = " << M << " (N " << N << ", K " << K << ")";
    };
    for (int64_t M : {2, 16, 17, 37}) {
      const int64_t first = rows - M;
      expect_rows(emulated<tc::Gemv<4>>(x, w, first, M, N, K, f), first, M, "gemv");
      expect_rows(emulated<tc::Gemv<3, true>>(x, w, first, M, N, K, f), first, M, "gemv, bf16 x");
      expect_rows(emulated<tc::TileM16>(x, w, first, M, N, K, f), first, M, "TileM16");
      expect_rows(emulated<tc::TileM64N32>(x, w, first, M, N, K, f), first, M, "TileM64N32");
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (int64_t M : {17, 32}) {
      expect_rows(emulated<tc::TileM32>(x, w, 5, M, N, K, f), 5, M, "TileM32");
      expect_rows(emulated<tc::TileM32N32>(x, w, 3, M, N, K, f), 3, M, "TileM32N32");
    }
    for (int64_t M : {33, 48, 64, 100}) expect_rows(emulated<tc::TileM64>(x, w, 7, M, N, K, f), 7, M, "TileM64");
    for (int64_t M : {65, 128, 256}) {
      expect_rows(emulated<tc::TileM128>(x, w, rows - M, M, N, K, f), rows - M, M, "TileM128");
      expect_rows(emulated<tc::TileM128N64>(x, w, 1, M, N, K, f), 1, M, "TileM128N64");
    }
    expect_rows(emulated<tc::TileM128>(x, w, 0, rows, N, K, f), 0, rows, "TileM128");
    ASSERT_EQ(f.count, 0) << f.first;
  }
}

// The verify sizes get the tall, 128-column shapes on an H200 (132 multiprocessors) for the 8B / 27B
// weights, narrower ones where those would leave multiprocessors idle.
TEST(TcEmulation, ChooseTile) {
  auto pick = [](int64_t M, int64_t N, int64_t K) { return tc::choose_tile(M, N, 132, tc::k_split(N, K).S); };
  EXPECT_EQ(pick(16, 4096, 4096), tc::TileKind::M32);
  EXPECT_EQ(pick(17, 4096, 4096), tc::TileKind::M32);
  EXPECT_EQ(pick(32, 151936, 4096), tc::TileKind::M32);
  EXPECT_EQ(pick(32, 1024, 4096), tc::TileKind::M32N32);
  EXPECT_EQ(pick(64, 4096, 4096), tc::TileKind::M64);
  EXPECT_EQ(pick(48, 24576, 4096), tc::TileKind::M64);
  EXPECT_EQ(pick(128, 4096, 4096), tc::TileKind::M128);
  EXPECT_EQ(pick(256, 4096, 12288), tc::TileKind::M128);
  EXPECT_EQ(pick(256, 151936, 4096), tc::TileKind::M128);
  EXPECT_EQ(pick(256, 5120, 17408), tc::TileKind::M128);
  EXPECT_EQ(pick(2048, 4096, 4096), tc::TileKind::M128);
}

// Where the 17-64-row kernel runs by default (mid_fills_waves) on a 132-multiprocessor H200: up to 32 rows
// always; above, the 8B's q/o and down (128 CTAs), q/k/v (192) and gate/up (768), not the 27B's o and down
// (160: a second wave 21 % full) nor a 16-CTA call.
TEST(TcEmulation, MidFillsWaves) {
  EXPECT_TRUE(tc::mid_fills_waves(17, 16, 132));
  EXPECT_TRUE(tc::mid_fills_waves(32, 160, 132));
  EXPECT_TRUE(tc::mid_fills_waves(64, 128, 132));
  EXPECT_TRUE(tc::mid_fills_waves(64, 192, 132));
  EXPECT_TRUE(tc::mid_fills_waves(48, 768, 132));
  EXPECT_FALSE(tc::mid_fills_waves(64, 160, 132));
  EXPECT_FALSE(tc::mid_fills_waves(33, 16, 132));
  EXPECT_FALSE(tc::mid_fills_waves(64, 133, 132));
}

// The wgmma kernel's shared-memory image (matmul_wgmma.cuh): the pieces a stage's threads load
// (piece_of) cover each (row, 16-byte k piece) of a tile once; the swizzled offsets (tile_off) are a
// permutation of the tile's 16-byte slots that keeps every 8-row, 128-byte atom in its own 1024 bytes;
// the 8 rows that 8 consecutive pieces (one k piece) fill land in 8 different bank groups; the
// descriptor has wgmma's fields (128-byte swizzle, stride 1024 bytes).
TEST(TcEmulation, WgmmaTileImage) {
  for (int rows : {64, 128}) {
    std::vector<int> seen(size_t(rows) * 8, 0), slot(size_t(rows) * 8, 0);
    for (int i = 0; i < rows * 8; ++i) {
      const wg::Piece pc = wg::piece_of(i);
      ASSERT_LT(pc.row, rows);
      ASSERT_LT(pc.k8, 8);
      ++seen[size_t(pc.row * 8 + pc.k8)];
      const int off = wg::tile_off(pc.row, pc.k8);
      ASSERT_EQ(off % 16, 0);
      ASSERT_EQ(off / 1024, pc.row / 8) << "row " << pc.row << " left its 8-row atom";
      ++slot[size_t(off / 16)];
    }
    for (int v : seen) EXPECT_EQ(v, 1);
    for (int v : slot) EXPECT_EQ(v, 1);
    for (int first = 0; first < rows * 8; first += 8) {
      std::vector<int> groups;
      for (int i = first; i < first + 8; ++i)
        groups.push_back(wg::tile_off(wg::piece_of(i).row, wg::piece_of(i).k8) / 16 % 8);
      std::sort(groups.begin(), groups.end());
      EXPECT_EQ(std::unique(groups.begin(), groups.end()), groups.end()) << "pieces " << first << "..";
    }
  }
  const uint64_t d = wg::smem_desc(0x12340);
  EXPECT_EQ(d & 0x3FFF, uint64_t{0x12340 >> 4});
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);
  EXPECT_EQ((d >> 32) & 0x3FFF, uint64_t{1024 >> 4});
  EXPECT_EQ(d >> 62, 1u);
}

// The wgmma kernel's shapes on an H200: 128-row tiles where M > 64 still gives a CTA per
// multiprocessor, 64-row ones otherwise.
TEST(TcEmulation, ChooseWgmmaTile) {
  auto pick = [](int64_t M, int64_t N, int64_t K) { return wg::choose_wgmma_tile(M, N, 132, tc::k_split(N, K).S); };
  EXPECT_EQ(pick(33, 4096, 4096), wg::WgKind::M64);
  EXPECT_EQ(pick(64, 151936, 4096), wg::WgKind::M64);
  EXPECT_EQ(pick(65, 4096, 4096), wg::WgKind::M128);
  EXPECT_EQ(pick(256, 151936, 4096), wg::WgKind::M128);
  EXPECT_EQ(pick(2048, 5120, 17408), wg::WgKind::M128);
  EXPECT_EQ(pick(100, 128, 48), wg::WgKind::M64);  // one 128-row CTA would leave 131 multiprocessors idle
}

TEST(TcEmulation, TileOrderVisitsEveryTileOnce) {
  for (int64_t nbm : {1, 2, 7, 16, 33})
    for (int64_t nbn : {1, 3, 64})
      for (int64_t group : {1, 4, 16}) {
        std::vector<int> seen(size_t(nbm * nbn));
        for (int64_t pid = 0; pid < nbm * nbn; ++pid) {
          const tc::TileId t = tc::tile_of(pid, nbm, nbn, group);
          ASSERT_TRUE(t.mb >= 0 && t.mb < nbm && t.nb >= 0 && t.nb < nbn) << nbm << " " << nbn << " " << group;
          ++seen[size_t(t.mb * nbn + t.nb)];
        }
        for (int s : seen) ASSERT_EQ(s, 1) << nbm << " " << nbn << " " << group;
      }
}
}  // namespace
}  // namespace specserve::cuda_test
