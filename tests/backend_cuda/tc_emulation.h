#pragma once
// The bf16 tensor-core matmul kernels run on the host: ldmatrix and mma.m16n8k16 emulated from the PTX
// ISA's fragment tables, cp.async with its bounds checked, and each kernel's index code (the very
// functions of matmul_tensor_core*.cuh the device runs) driven CTA after CTA in the device's issue
// order. test_cuda_matmul_tc_emulation.cpp checks the results against the contract's reference and
// across kernels.
#include <array>
#include <bit>
#include <cstring>
#include <type_traits>

#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "core/dtype.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {

namespace tc = cuda::tc;

// ---- the host emulation ----------------------------------------------------------------------------

struct Fault {
  int count = 0;
  std::string first;
  void check(bool ok, const char* what) {
    if (!ok && count++ == 0) first = what;
  }
};

using Regs32 = std::array<std::array<uint32_t, 4>, 32>;

// ldmatrix.m8n8.x{1,2,4}.b16: lanes 8q..8q+7 address the rows of matrix q; lane l receives, in
// register q, elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix q (low half first).
inline void emu_ldmatrix(const std::vector<uint8_t>& smem, const std::array<int, 32>& off, int nmat, Regs32& out,
                         Fault& f) {
  for (int q = 0; q < nmat; ++q)
    for (int lane = 0; lane < 32; ++lane) {
      const int a = off[size_t(8 * q + lane / 4)] + 4 * (lane % 4);
      f.check(off[size_t(8 * q + lane / 4)] % 16 == 0 && a >= 0 && a + 4 <= int(smem.size()), "ldmatrix address");
      if (a >= 0 && a + 4 <= int(smem.size())) std::memcpy(&out[size_t(lane)][size_t(q)], &smem[size_t(a)], 4);
    }
}

// mma.m16n8k16.row.col.f32.bf16.bf16.f32, from the PTX ISA's tables (groupID g = lane / 4, t = lane % 4):
// A a_i: row g for i in {0,1,4,5} else g + 8, col 2t + (i & 1) (+ 8 for i >= 4); B b_i: row (k)
// 2t + (i & 1) (+ 8 for i >= 2), col g; C c_i: row g (+ 8 for i >= 2), col 2t + (i & 1). Register r
// holds elements 2r (low half) and 2r + 1. Products exact, sums in double.
inline void emu_mma(std::array<float*, 32> c, const Regs32& a, const Regs32& b) {
  float A[16][16], B[16][8];
  for (auto& r : A) std::fill(std::begin(r), std::end(r), NAN);
  for (auto& r : B) std::fill(std::begin(r), std::end(r), NAN);
  auto half = [](uint32_t reg, int i) { return bf16_to_f32(uint16_t(reg >> (16 * (i & 1)))); };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = half(a[size_t(lane)][size_t(i / 2)], i);
    }
    for (int i = 0; i < 4; ++i) B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = half(b[size_t(lane)][size_t(i / 2)], i);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
      double s = c[size_t(lane)][i];
      for (int k = 0; k < 16; ++k) s += double(A[row][k]) * double(B[k][col]);
      c[size_t(lane)][i] = float(s);
    }
  }
}

// Sums the S partial tiles (bm x bn, row-major) of the output tile at (m0, n0) into p.y as the CTAs of
// its cluster do (reduce_tile: every rank, every thread).
inline void emu_reduce(const tc::Params& p, int64_t m0, int64_t n0, int bm, int bn, int threads,
                       const std::vector<std::vector<float>>& parts) {
  for (int rank = 0; rank < p.S; ++rank)
    for (int tid = 0; tid < threads; ++tid)
      tc::reduce_tile(p, m0, n0, bm, bn, rank, tid, threads, [&](int s, int e) { return parts[size_t(s)][size_t(e)]; });
}

// A fragment register holding a half that is all ones (0xffff, the fill of shared memory never loaded;
// no operand here has that NaN): the kernel would read bytes it never loaded.
inline bool unloaded(const Regs32& r, int regs) {
  for (const auto& lane : r)
    for (int q = 0; q < regs; ++q)
      if ((lane[size_t(q)] & 0xffffu) == 0xffffu || (lane[size_t(q)] >> 16) == 0xffffu) return true;
  return false;
}

// The tiled kernel's pre-pass (matmul_x_to_bf16) on the host: x's bf16 copy, by xb_pair.
inline std::vector<uint16_t> emulate_xb(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t pitch) {
  std::vector<uint16_t> xb(size_t(tc::xb_rows(M) * pitch), uint16_t{0xffff});
  for (int64_t i = 0; i < tc::xb_rows(M) * pitch / 2; ++i) {
    const uint32_t v = tc::xb_pair(x, ldx, M, K, pitch, i, [](float lo, float hi) {
      return uint32_t(f32_to_bf16(lo)) | uint32_t(f32_to_bf16(hi)) << 16;
    });
    xb[size_t(2 * i)] = uint16_t(v);
    xb[size_t(2 * i + 1)] = uint16_t(v >> 16);
  }
  return xb;
}

// cp.async 16 (src-size `bytes`) from [lo, hi) operand memory into the emulated shared memory: checks the
// destination, the alignment and the source range, then copies `bytes` and zero-fills the rest.
template <class InSmem, class E>
inline void emu_cp16(std::vector<uint8_t>& smem, Fault& f, InSmem in_smem, int off, const E* src, int bytes,
                     const E* lo, const E* hi) {
  const int esize = int(sizeof(E));
  f.check(off % 16 == 0 && in_smem(off, 16) && bytes >= 0 && bytes <= 16 && bytes % esize == 0, "cp16 dst/bytes");
  f.check(reinterpret_cast<uintptr_t>(src) % 16 == 0 && src >= lo && src + bytes / esize <= hi, "cp16 src");
  if (!in_smem(off, 16)) return;
  std::memset(&smem[size_t(off)], 0, 16);
  if (bytes) std::memcpy(&smem[size_t(off)], src, size_t(bytes));
}

// Runs the kernel of tile shape T on the host, CTA after CTA (each one slice of one tile), phase after
// phase, as the device code of matmul_tc_kernel does. xb_end / w_end bound the operands' memory (reads
// past them are faults).
template <class T>
inline void emulate(const tc::Params& p, const uint16_t* xb_end, const uint16_t* w_end, Fault& f) {
  constexpr int kWarps = T::kWarpsM * T::kWarpsN;
  const tc::Layout<T> lay{p.a_rows};
  std::vector<uint8_t> smem(size_t(lay.smem_bytes()));
  auto in_smem = [&](int off, int bytes) { return off >= 0 && off + bytes <= int(smem.size()); };
  auto cp16 = [&](int off, const auto* src, int bytes, const auto* lo, const auto* hi) {
    emu_cp16(smem, f, in_smem, off, src, bytes, lo, hi);
  };
  auto cp16_x = [&](int off, const uint16_t* src, int bytes) {
    f.check(bytes == 16, "cp16 of x: a whole piece");
    cp16(off, src, bytes, p.xb, xb_end);
  };
  auto cp16_w = [&](int off, const uint16_t* src, int bytes) { cp16(off, src, bytes, p.w, w_end); };
  auto st = [&](int off, auto v) {
    f.check(off % int(sizeof v) == 0 && in_smem(off, int(sizeof v)), "scalar smem store");
    if (in_smem(off, int(sizeof v))) std::memcpy(&smem[size_t(off)], &v, sizeof v);
  };
  struct LaneAcc {
    float v[T::kWarpM16][T::kWarpN8][4];
  };
  for (int64_t pid = 0; pid < p.nbm * p.nbn; ++pid) {
    const tc::TileId t = tc::tile_of(pid, p.nbm, p.nbn, p.group);
    const int64_t m0 = t.mb * T::kBM, n0 = t.nb * T::kBN;
    const int valid_rows = int(std::min<int64_t>(T::kBM, p.M - m0));
    std::vector<std::vector<float>> parts(size_t(p.S), std::vector<float>(size_t(T::kBM * T::kBN), NAN));
    for (int s = 0; s < p.S; ++s) {
      std::fill(smem.begin(), smem.end(), uint8_t{0xff});  // NaN: a read of bytes never loaded shows
      const tc::Slice sl = tc::slice_of(p, s);
      f.check(sl.begin < sl.end, "empty slice");
      const int64_t ktiles = sl.tiles(T::kKT);
      std::vector<LaneAcc> acc(size_t(kWarps * 32));
      for (auto& a : acc) std::memset(a.v, 0, sizeof a.v);
      auto load = [&](int stage, int64_t kt) {
        for (int tid = 0; tid < T::kThreads; ++tid)
          tc::load_stage<T>(p, lay, stage, m0, n0, sl.k0() + kt * T::kKT, tid, cp16_x, cp16_w, st);
      };
      for (int st = 0; st < T::kStages - 1; ++st)
        if (st < ktiles) load(st, st);
      for (int64_t kt = 0; kt < ktiles; ++kt) {
        if (kt + T::kStages - 1 < ktiles) load(int((kt + T::kStages - 1) % T::kStages), kt + T::kStages - 1);
        const int stage = int(kt % T::kStages);
        for (int warp = 0; warp < kWarps; ++warp) {
          const int wm = warp / T::kWarpsN, wn = warp % T::kWarpsN;
          if (!tc::m16_active<T>(wm, 0, valid_rows)) continue;
          for (int kk = 0; kk < T::kKT / tc::kMmaK; ++kk) {
            if (sl.begin + kt * (T::kKT / tc::kMmaK) + kk >= sl.end) break;
            std::vector<Regs32> b(T::kWarpN8);
            for (int j = 0; j < T::kWarpN8; j += 2) {
              const bool x4 = j + 1 < T::kWarpN8;
              std::array<int, 32> off;
              for (int lane = 0; lane < 32; ++lane)
                off[size_t(lane)] = tc::b_ldsm_off<T>(lay, stage, lane, wn, j, kk, x4);
              Regs32 r{};
              emu_ldmatrix(smem, off, x4 ? 4 : 2, r, f);
              f.check(!unloaded(r, x4 ? 4 : 2), "B fragment of shared memory never loaded");
              for (int lane = 0; lane < 32; ++lane) {
                b[size_t(j)][size_t(lane)] = {r[size_t(lane)][0], r[size_t(lane)][1], 0, 0};
                if (x4) b[size_t(j + 1)][size_t(lane)] = {r[size_t(lane)][2], r[size_t(lane)][3], 0, 0};
              }
            }
            for (int i = 0; i < T::kWarpM16; ++i) {
              if (!tc::m16_active<T>(wm, i, valid_rows)) continue;
              std::array<int, 32> aoff;
              for (int lane = 0; lane < 32; ++lane) aoff[size_t(lane)] = tc::a_ldsm_off<T>(lay, stage, lane, wm, i, kk);
              Regs32 a{};
              emu_ldmatrix(smem, aoff, 4, a, f);
              f.check(!unloaded(a, 4), "A fragment of shared memory never loaded");
              for (int j = 0; j < T::kWarpN8; ++j) {
                std::array<float*, 32> c;
                for (int lane = 0; lane < 32; ++lane) c[size_t(lane)] = acc[size_t(warp * 32 + lane)].v[i][j];
                emu_mma(c, a, b[size_t(j)]);
              }
            }
          }
        }
      }
      for (int warp = 0; warp < kWarps; ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          const auto& v = acc[size_t(warp * 32 + lane)].v;
          if (p.S == 1)
            tc::store_tile<T>(p, m0, n0, lane, warp / T::kWarpsN, warp % T::kWarpsN, v);
          else
            tc::for_each_acc<T>(lane, warp / T::kWarpsN, warp % T::kWarpsN, v,
                                [&](int r, int c, float x) { parts[size_t(s)][size_t(r * T::kBN + c)] = x; });
        }
    }
    if (p.S > 1) emu_reduce(p, m0, n0, T::kBM, T::kBN, T::kThreads, parts);
  }
}

// The warp-split streaming kernel (matmul_tc_gemv_kernel) on the host, CTA after CTA: each warp's
// ring loaded as the device issues it (a warp's load overwriting a stage it still has to read would
// show as a wrong result), then the partials written over the stages and summed (gemv_reduce). CTA x
// is column block x / nbm (of the launch's segments, segment_of) and row block x % nbm, as on the
// device. Weight reads are checked against [the segment's w, w_end).
template <class G>
void emulate_gemv(const tc::Params& launch, const float* x_end, const uint16_t* xb_end, const uint16_t* w_end,
                  Fault& f) {
  const tc::GemvLayout<G> lay{launch.a_rows};
  std::vector<uint8_t> smem(size_t(lay.smem_bytes(launch.S)));
  tc::Params p = launch;  // the current CTA's segment
  auto in_smem = [&](int off, int bytes) { return off >= 0 && off + bytes <= int(smem.size()); };
  auto cp16 = [&](int off, const auto* src, int bytes, const auto* lo, const auto* hi) {
    emu_cp16(smem, f, in_smem, off, src, bytes, lo, hi);
  };
  auto cp16_x = [&](int off, const auto* src, int bytes) {
    if constexpr (std::is_same_v<decltype(src), const float*>)
      cp16(off, src, bytes, p.x, x_end);
    else
      cp16(off, src, bytes, p.xb, xb_end);
  };
  auto cp16_w = [&](int off, const uint16_t* src, int bytes) { cp16(off, src, bytes, p.w, w_end); };
  auto st = [&](int off, auto v) {
    f.check(off % int(sizeof v) == 0 && in_smem(off, int(sizeof v)), "scalar smem store");
    if (in_smem(off, int(sizeof v))) std::memcpy(&smem[size_t(off)], &v, sizeof v);
  };
  auto cvt2 = [&](int off) -> uint32_t {
    f.check(!G::kXb && off % 8 == 0 && in_smem(off, 8), "A fragment read");
    float v[2] = {NAN, NAN};
    if (in_smem(off, 8)) std::memcpy(v, &smem[size_t(off)], 8);
    return uint32_t(f32_to_bf16(v[0])) | uint32_t(f32_to_bf16(v[1])) << 16;
  };
  const tc::GemvShape shape = tc::gemv_shape(launch.S);
  for (int64_t cta = 0; cta < launch.nbn * launch.nbm; ++cta) {
    int64_t block = cta / launch.nbm;
    p = tc::segment_of(launch, block);
    const int64_t m0 = cta % launch.nbm * G::kBM, n0 = block * shape.columns();
    const int valid_rows = int(std::min<int64_t>(G::kBM, p.M - m0));
    std::fill(smem.begin(), smem.end(), uint8_t{0xff});
    float acc[G::kWarps][32][G::kMaxSlicesPerWarp][2][4] = {};
    for (int warp = 0; warp < G::kWarps; ++warp) {
      const tc::GemvWork work = tc::gemv_work(p, warp);
      const int64_t n0w = n0 + work.group * G::kWarpN, tiles = work.tiles(G::kKT);
      std::array<tc::GemvLane, 32> lanes;
      for (int lane = 0; lane < 32; ++lane)
        lanes[size_t(lane)] = tc::gemv_lane(p, lay, work, warp, lane, n0w, m0, valid_rows);
      auto issue = [&](int64_t t) {
        const bool whole = tc::gemv_tile_whole<G>(p, work, n0w, t);
        for (int lane = 0; lane < 32; ++lane) {
          if (whole)
            tc::gemv_load_whole<G>(
                p, lay, lanes[size_t(lane)], valid_rows, t, [&](int off, const auto* src) { cp16_x(off, src, 16); },
                [&](int off, const uint16_t* src) { cp16_w(off, src, 16); });
          else
            tc::gemv_load_stage<G>(p, lay, work, warp, n0w, m0, t, lane, cp16_x, cp16_w, st, st);
        }
      };
      for (int t = 0; t < G::kStages - 1; ++t)
        if (t < tiles) issue(t);
      for (int64_t kt = 0; kt < tiles; ++kt) {
        if (kt + G::kStages - 1 < tiles) issue(kt + G::kStages - 1);
        const int stage = int(kt % G::kStages);
        for (int kk = 0; kk < G::kKT / tc::kMmaK; ++kk) {
          const int64_t c = work.begin + kt * (G::kKT / tc::kMmaK) + kk;
          if (c >= work.end) break;
          std::array<int, 32> off;
          for (int lane = 0; lane < 32; ++lane) off[size_t(lane)] = tc::gemv_b_off(lay, lanes[size_t(lane)], stage, kk);
          Regs32 r{}, a{}, b0{}, b1{}, ra{};
          emu_ldmatrix(smem, off, 4, r, f);
          if constexpr (G::kXb) {  // the A ldmatrix.x4 of the whole warp, at the lanes' addresses
            std::array<int, 32> aoff;
            for (int lane = 0; lane < 32; ++lane) {
              uint32_t unused[4];
              tc::gemv_gather_a(lay, lanes[size_t(lane)], stage, kk, unused, cvt2,
                                [&](int o, uint32_t(&)[4]) { aoff[size_t(lane)] = o; });
            }
            emu_ldmatrix(smem, aoff, 4, ra, f);
          }
          for (int lane = 0; lane < 32; ++lane) {
            uint32_t regs[4];
            tc::gemv_gather_a(lay, lanes[size_t(lane)], stage, kk, regs, cvt2, [&](int, uint32_t(&v)[4]) {
              for (int q = 0; q < 4; ++q) v[q] = ra[size_t(lane)][size_t(q)];
            });
            a[size_t(lane)] = {regs[0], regs[1], regs[2], regs[3]};
            b0[size_t(lane)] = {r[size_t(lane)][0], r[size_t(lane)][1], 0, 0};
            b1[size_t(lane)] = {r[size_t(lane)][2], r[size_t(lane)][3], 0, 0};
          }
          const int chain = c < work.split ? 0 : 1;
          std::array<float*, 32> c0, c1;
          for (int lane = 0; lane < 32; ++lane) {
            c0[size_t(lane)] = acc[warp][lane][chain][0];
            c1[size_t(lane)] = acc[warp][lane][chain][1];
          }
          emu_mma(c0, a, b0);
          emu_mma(c1, a, b1);
        }
      }
    }
    for (int warp = 0; warp < G::kWarps; ++warp) {
      const tc::GemvWork work = tc::gemv_work(p, warp);
      const int64_t n0w = n0 + work.group * G::kWarpN;
      for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < work.slices; ++j)
          tc::gemv_for_each_acc(lane, acc[warp][lane][j], [&](int r, int c, float v) {
            if (p.S == 1) {
              if (r < valid_rows && n0w + c < p.N) p.y[(m0 + r) * p.ldy + n0w + c] = v;
            } else {
              st(tc::GemvLayout<G>::part_off(p.S, work.group, work.first_slice + j, r, c), v);
            }
          });
    }
    if (p.S == 1) continue;
    for (int tid = 0; tid < G::kThreads; ++tid)
      tc::gemv_reduce<G>(p, m0, n0, valid_rows, tid, [&](int off) {
        f.check(off % 4 == 0 && in_smem(off, 4), "partial read");
        float v = NAN;
        if (in_smem(off, 4)) std::memcpy(&v, &smem[size_t(off)], 4);
        return v;
      });
  }
}

template <class T>
inline constexpr bool kIsGemv = false;
template <int St, bool Xb>
inline constexpr bool kIsGemv<tc::Gemv<St, Xb>> = true;

// Runs the emulation of kernel T (a tc::Tile or a tc::Gemv) into y.
template <class T>
inline void emulate_into(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int64_t M,
                         int64_t N, int64_t K, bool force_scalar, const float* x_end, const uint16_t* w_end, Fault& f) {
  if constexpr (kIsGemv<T>) {
    tc::Params p = tc::make_gemv_params<T>(x, ldx, w, ldw, y, ldy, M, N, K);
    std::vector<uint16_t> xb;
    if constexpr (T::kXb) {
      p.ldxb = tc::xb_pitch(K, T::kKT);
      xb = emulate_xb(x, ldx, M, K, p.ldxb);
      p.xb = xb.data();
    }
    if (force_scalar) p.vec_x = p.vec_w = false;
    emulate_gemv<T>(p, x_end, xb.data() + xb.size(), w_end, f);
  } else {
    (void)x_end;  // the kernel reads x only through its copy
    const int64_t pitch = tc::xb_pitch(K, T::kKT);
    const std::vector<uint16_t> xb = emulate_xb(x, ldx, M, K, pitch);
    tc::Params p = tc::make_tiled_params<T>(x, ldx, xb.data(), pitch, w, ldw, y, ldy, M, N, K);
    if (force_scalar) p.vec_x = p.vec_w = false;
    emulate<T>(p, xb.data() + xb.size(), w_end, f);
  }
}

}  // namespace specserve::cuda_test
