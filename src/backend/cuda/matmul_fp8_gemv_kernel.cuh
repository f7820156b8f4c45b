// The streaming matmul for block-scaled fp8 weights and few rows (decode and verify, 1 to gemv_max_rows()
// rows: MatmulKernel::Fp8Gemv): y[M, N] = x[M, K] · dequant(w)[N, K]ᵀ, the weights read once as e4m3 (half
// the bytes of bf16) with their block scales, for one weight or up to four sharing x (q/k/v, gate/up, Qwen3.5's
// in_proj_qkv / in_proj_z) in one launch, each with its own K split (k_split of its N: a weight's bits never depend
// on the launch it shares). The 27B's in_proj_qkv (640 CTAs at one row) ran alone in 1.2 waves of 4 CTAs a
// multiprocessor and in_proj_z (384) in another launch: 29.4 + 12.9 µs; together 34.4 µs, its fp8 decode −0.3 to
// −0.6 ms (H100, session 49). matmul_fp8_gemv.cuh has the shape, the layout, the fragment code and why
// every result has the bits of the bf16 gemv kernel on the bf16 dequantisation (so a row's bits do not
// depend on M).
//
// What the first version of this kernel (git: f2bb60e) did and the second (2810f11) does not, each a
// measured or counted cost on an H200 (8B decode 8.22 ms against 5.0 in bf16, 24 % of its copy roofline):
//   - bytes in flight: 2 KB code tiles with 3-4 stages per warp and no weight loads before the wait for
//     the previous kernel; now up to 8 stages (14 KB per warp in flight), the first tiles' codes and every
//     block scale issued before pdl_wait, and q/k/v or gate/up in one launch (the 1024-row k and v
//     projections alone were 64 CTAs on 132 multiprocessors);
//   - a dependent global load of the block scale for each of a lane's four pieces in every tile, after the
//     tile's wait: now the scales of the warp's whole run arrive with the first stage;
//   - per element the e4m3 conversion instruction, a round trip of the dequantised tile through shared
//     memory (16 B stores, a warp barrier, ldmatrix) and per-piece bounds arithmetic: now the B fragments
//     are built in registers, the bf16-scale tiles multiply in bf16x2, and whole tiles load without bounds.
// The second version measured 8B decode 5.28 ms (bf16: 5.0) and, on the 8B q/o shape at one row, 1.35 TB/s
// = 0.32 of the copy bandwidth, where the bf16 gemv streams at 0.88-1.0: with 2 warps per scheduler it was
// bound by each warp's latency. What it did and this one (the third) does not, counted in the SASS of the
// f32-x kernel (the one decode runs; per 128-k tile of 2 KB, i.e. 8 chunks of 256 codes):
//   - two branches per chunk (the run's end, and the slice picking its chain, compiled into 4 predicated
//     mma a chunk) and the path chosen per tile, so no chunk's shared loads could start before the
//     previous chunk's arithmetic: now a regular tile (fp8g::regular_tiles: whole pieces, one slice, one
//     scale block; every tile of the 8B and 27B shapes) is one branch-free block that loads all 8 chunks'
//     codes first; a warp's second chain takes over between tiles (fp8g::switch_tile), not in a branch;
//   - about 47 instructions a chunk (two 4-byte loads, a permute and 7 integer operations per 4 codes; the
//     f32 A fragment rounded per chunk and zeroed by selects; register moves; 4 mma issues): now 19 in the
//     tile's block plus 2 for its loads — per row and chunk one 16-byte load, then per bf16x2 register one
//     sign-replicating permute, one shift, one mask and the bf16x2 multiply (or, for f32 scales below 2^8,
//     two f32 multiplies by scale × 2^120: the folded path, instead of four); the A fragment of a chunk is
//     one ldmatrix.x4 from the warp's bf16 copy of the tile's x, rounded once per tile.
// A regular bf16-scale tile at one row of x is about 270 instructions on its path (the branch-free block
// 158, its 16 code loads 17, x's rounding ~20, the next tile's copies ~40, the scale and the path ~15, the
// loop ~15), the second version's about 470 (the budget at 4.3 TB/s: a tile every ~110-125 cycles of an
// SM's 4 issue slots a cycle).
//
// What the third version did and this one (the fourth) does not: per tile and warp 16 16-byte shared loads of
// codes (four lanes of a row loading the same 16 bytes: 64 shared-memory wavefronts) and 8 ldmatrix.x4 for x's A
// fragments (32 more), against about 116 cycles of a multiprocessor per 2 KB tile at the copy bandwidth; now the
// codes sit in fragment order (fp8_code_order.h), 4 ldmatrix.x4 a tile (16 wavefronts), and with f32 x one
// 8-byte load a chunk reads a lane's A registers (8).
//
// Even so the third version was latency-bound at 2-3 warps a scheduler (ncu, 8B down_proj at one row: 4.6 cycles
// between a warp's instructions, no eligible warp 58 % of the cycles, 143 registers a thread, 12.5 % occupancy). For
// one row of f32 x a launch may take CTAs of 8 warps of one slice each (at most 128 registers, 2 CTAs a multiprocessor:
// 25 % occupancy, 43 % of cycles without an eligible warp) where its waves allow (fp8_warps_for).
//
// Stages (matmul_fp8_gemv.cuh: any count has the same bits) are chosen per launch for the most CTAs a
// multiprocessor, then the deepest ring (the shallowest with x's 16-row bf16 copy) (fp8_stages_for); tests
// force them, the CTA's warps, the early loads, the straight tiles and the dequantisation path (Fp8GemvForce)
// to check that the bits never change.
//
// This header holds the kernel and its parameters; matmul_fp8_gemv.cu, the one file that includes it, holds the
// launch policy (stages, warps, shared memory) and the entry points.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_gemv.cuh"
#include "backend/cuda/matmul_fp8_math.cuh"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_rows.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"

namespace specserve::cuda::kernels::fp8_gemv {

using namespace specserve::cuda::tc;
using fp8g::Fp8Gemv;
using fp8g::Fp8Lane;
using fp8g::Fp8Layout;
using fp8g::XMode;

constexpr int kMaxParts = Params::kMaxSegments;

// One weight of a launch; its column blocks are [previous part's nbn_end, nbn_end).
struct Fp8Part {
  const uint8_t* q = nullptr;  // e4m3 codes, rows ldq bytes apart
  int64_t ldq = 0;
  bool vec_q = false;  // 16-byte cp.async of the codes (16-byte aligned, ldq % 16 == 0 or one row)
  const float* scales = nullptr;
  int64_t scale_ld = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t N = 0;
  int S = 1;  // its K split (k_split of its N and K): the weights of a launch may differ in it
  int64_t cps = 0;
  int64_t nbn_end = 0;
};

// A launch: the gemv Params of x (x, M, K, a_rows, vec_x, xb, nbm, nbn over all parts; its w, y, N and split are
// the parts', its S and cps the largest part's, which size the shared memory), the parts, and the choices tests may
// force.
struct Fp8Params {
  Params p;
  Fp8Part part[kMaxParts];
  int parts = 1;
  int slots = 0;         // scale slots per warp (fp8g::scale_slots)
  bool early_w = true;   // the first tiles' codes before pdl_wait
  bool fast = true;      // tiles with bf16 scales: the bf16x2 multiply
  bool convert = false;  // other tiles: the conversion path (else the folded or the bit path)
  bool regular = true;   // the straight-line tiles (fp8g::regular_tiles)
};

enum Path { kFast = 0, kBits = 1, kConvert = 2, kFolded = 3 };

__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinCtas) matmul_fp8_gemv_kernel(const Fp8Params f) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = smem_addr(smem);
  constexpr bool kXb = C::kX != XMode::F32;
  constexpr int kSt = C::kStages;
  constexpr int kChunks = C::kChunks;

  // The part of this CTA's column block (the CTAs of one column block's row blocks are adjacent, so the
  // later ones read the codes from L2).
  int64_t block = blockIdx.x / f.p.nbm, start = 0;
  Fp8Part w = f.part[0];
#pragma unroll
  for (int i = 1; i < kMaxParts; ++i)
    if (i < f.parts && block >= f.part[i - 1].nbn_end) {
      w = f.part[i];
      start = f.part[i - 1].nbn_end;
    }
  block -= start;
  Params p = f.p;
  p.N = w.N;
  p.y = w.y;
  p.ldy = w.ldy;
  p.S = w.S;
  p.cps = w.cps;

  const Fp8Layout<C> lay{p.a_rows, f.slots};
  const int sbytes = lay.stage_bytes();
  const GemvShape shape = gemv_shape(p.S, C::kWarps);
  const GemvWork work = gemv_work(p, warp, C::kWarps);
  const int64_t n0 = block * shape.columns(), n0w = n0 + work.group * C::kWarpN;
  const int64_t m0 = int64_t{blockIdx.x % p.nbm} * C::kBM;
  const int valid_rows = p.M - m0 < C::kBM ? static_cast<int>(p.M - m0) : C::kBM;
  const int tiles = static_cast<int>(work.tiles(C::kKT));
  const Fp8Lane<C> l = fp8g::fp8_lane(lay, warp, lane, n0w, w.ldq, work.begin, m0, kXb ? p.ldxb : p.ldx, valid_rows);
  const fp8g::ScaleRun run = fp8g::scale_run(work);
  // Tiles [0, whole) load whole 16-byte pieces without bounds; the regular ones run straight.
  const int whole = fp8g::whole_tiles(work, tiles, w.vec_q && (kXb || p.vec_x), n0w, p.N, p.K);
  const fp8g::RegularTiles regular = f.regular ? fp8g::regular_tiles(work, whole) : fp8g::RegularTiles{};
  const int switch_at = fp8g::switch_tile(work);       // the chain switch between tiles, or -1
  const int64_t switch_ch = fp8g::switch_chunk(work);  // ... else inside the tile cut at this chunk

  auto st_f32 = [&](int off, float v) { *reinterpret_cast<float*>(smem + off) = v; };
  auto cp16_x = [&](int off, const float* src, int bytes) { copy_piece<true>(sbase, smem, off, src, bytes); };
  auto scale = [&](int i) { return *reinterpret_cast<const float*>(smem + lay.sc_off(warp, i)); };

  // Whole tile t into the stage at byte offset sb: the codes (4 pieces a lane) and x.
  const uint8_t* q_src = w.q + l.q_src;
  const int64_t ld4 = 4 * w.ldq;
  auto issue_q_whole = [&](int t, int sb) {
    const uint8_t* src = q_src + int64_t{t} * C::kKT;
#pragma unroll
    for (int j = 0; j < 4; ++j) cp_async_cg(sbase + l.q_dst_of(j) + sb, src + j * ld4, 16);
  };
  auto issue_x_whole = [&](int t, int sb) {
    if constexpr (kXb) {
      const uint16_t* x = p.xb + l.x_src + int64_t{t} * C::kKT;
#pragma unroll
      for (int i = 0; i < C::kXbRows / 2; ++i) cp_async_ca(sbase + l.x_dst_of(i) + sb, x + 2 * i * p.ldxb, 16);
    } else {
      const float* x = p.x + l.x_src + int64_t{t} * C::kKT;
#pragma unroll 1
      for (int r = 0; r < valid_rows; ++r) cp_async_ca(sbase + l.x_dst + sb + r * C::kSA * 4, x + r * p.ldx, 16);
    }
  };
  // Any tile: codes zero past N and K (a piece cut by K is written byte by byte), x as the gemv kernel.
  auto issue_general = [&](int t, int stage) {
    const int64_t k0 = work.begin * kMmaK + int64_t{t} * C::kKT;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = lane + 32 * j, r = i / 8, c = (i % 8) * 16;
      const int64_t n = n0w + r, k = k0 + c;
      const int bytes = n >= p.N || k >= p.K ? 0 : p.K - k >= 16 ? 16 : static_cast<int>(p.K - k);
      const int off = lay.q_off(warp, stage, r, c);
      if (bytes == 16 && w.vec_q) {
        cp_async_cg(sbase + off, w.q + n * w.ldq + k, 16);
      } else {  // a whole group is stored in fragment order already; a group cut by K as it is: put it there
        const uint8_t* src = w.q + (bytes ? n * w.ldq + k : 0);
#pragma unroll 1
        for (int e = 0; e < 16; ++e) smem[off + (bytes == 16 ? e : fp8o::slot_of(e))] = e < bytes ? src[e] : uint8_t{0};
      }
    }
    if constexpr (kXb) {
#pragma unroll
      for (int i = 0; i < C::kXbRows / 2; ++i) {  // (the copy covers every tile: whole pieces, zero past M and K)
        const int r = lane / 16 + 2 * i, c = (lane % 16) * 8;
        cp_async_ca(sbase + lay.x_off(warp, stage, r, c), p.xb + (m0 + r) * p.ldxb + k0 + c, 16);
      }
    } else {
      load_x_rows(
          p, m0, k0, C::kKT, lane, 32, [&](int r, int c) { return lay.x_off(warp, stage, r, c); }, cp16_x, st_f32);
    }
  };
  auto issue = [&](int t, int stage) {
    if (t < whole) {
      issue_q_whole(t, stage * sbytes);
      issue_x_whole(t, stage * sbytes);
    } else {
      issue_general(t, stage);
    }
  };

  // Until pdl_wait nothing is read that another kernel writes: the block scales of the warp's run and the
  // first whole tiles' codes are weights (launch.cuh), so their round trip overlaps the previous kernel.
  // They join the first commit group. x is the previous kernel's output and waits.
  if (n0w < p.N)
    for (int i = lane; i < run.count; i += 32)
      cp_async_4(sbase + lay.sc_off(warp, i), w.scales + (n0w / 128) * w.scale_ld + run.first + i);
  const int early = f.early_w ? (tiles < kSt - 1 ? tiles : kSt - 1) : 0;
  for (int t = 0; t < early; ++t)
    if (t < whole) issue_q_whole(t, t * sbytes);
  pdl_wait();
  pdl_launch_dependents();
#pragma unroll 1
  for (int t = 0; t < kSt - 1; ++t) {
    if (t < early && t < whole)
      issue_x_whole(t, t * sbytes);
    else if (t < tiles)
      issue(t, t);
    cp_async_commit();
  }

  // The A fragments (fp8_lane): from the stage (x's bf16 copy) or, with f32 x, from the warp's bf16 tile,
  // into which tile_x rounds the stage's x rows (cvt.rn.bf16x2.f32, the rounding of every kernel's A
  // fragments) once per tile.
  auto tile_x = [&](int sb) {
    if constexpr (!kXb) {
#pragma unroll
      for (int r = 0; r < fp8g::kF32MaxRows; ++r) {
        if (r >= valid_rows) break;
        const float4 v = *reinterpret_cast<const float4*>(smem + l.x_dst + sb + r * C::kSA * 4);
        *reinterpret_cast<uint32_t*>(smem + l.xh_dst[0] + r * lay.xh_row_bytes()) = pack_bf16x2(v.x, v.y);
        *reinterpret_cast<uint32_t*>(smem + l.xh_dst[1] + r * lay.xh_row_bytes()) = pack_bf16x2(v.z, v.w);
      }
      __syncwarp();
    }
  };
  auto load_a = [&](int sb, int kk, uint32_t(&a)[4]) {
    if constexpr (kXb) {
      ldmatrix_x4(sbase + l.a_chunk(kk) + sb, a[0], a[1], a[2], a[3]);
    } else {  // fp8_lane: row g % M's a0 a2, also for the fragment's rows 8-15
      const uint2 v = *reinterpret_cast<const uint2*>(smem + l.a_chunk(kk));
      a[0] = a[1] = v.x;
      a[2] = a[3] = v.y;
    }
  };

  // The chain being fed (per n8 tile, the C fragment) and, for a two-slice warp, its first slice's partial.
  float acc[2][4] = {}, first[2][4] = {};
  auto switch_chain = [&] {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        first[j][e] = acc[j][e];
        acc[j][e] = 0.0f;
      }
  };

  // A regular tile (fp8g::regular_tiles; one scale: sp for the fast path, s120 = scale × 2^120 for the
  // folded one): every shared load of its 8 chunks, then their dequantisation and mma, no branch.
  auto regular_tile = [&](auto path, int sb, uint32_t sp, float s120) {
    constexpr int kPath = decltype(path)::value;
    uint32_t q[kChunks / 2][4];  // (rows g, g + 8) × (chunks 2i, 2i + 1): fp8_lane
    uint32_t a[kChunks][4];
#pragma unroll
    for (int i = 0; i < kChunks / 2; ++i) ldmatrix_x4(sbase + l.q_pair(i) + sb, q[i][0], q[i][1], q[i][2], q[i][3]);
    tile_x(sb);
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) load_a(sb, kk, a[kk]);
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
      uint32_t b[2][2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t v = q[kk / 2][2 * (kk % 2) + j];
        if constexpr (kPath == kFast) {
          b[j][0] = fp8::dequant_fast(v, fp8o::kPairLo, sp);
          b[j][1] = fp8::dequant_fast(v, fp8o::kPairHi, sp);
        } else {
          b[j][0] = fp8::dequant_folded(v, fp8o::kPairLo, s120);
          b[j][1] = fp8::dequant_folded(v, fp8o::kPairHi, s120);
        }
      }
      mma_bf16(acc[0], a[kk], b[0][0], b[0][1]);
      mma_bf16(acc[1], a[kk], b[1][0], b[1][1]);
    }
  };

  // Any other tile, chunk by chunk: never past the run's last chunk, the chain switched at `split`, each
  // chunk dequantised with its own scale block's scale.
  auto general_tile = [&](auto path, int sb, int64_t ch0, float sa, float sb2, int second) {
    constexpr int kPath = decltype(path)::value;
    const uint32_t spa = fp8g::fp8_scale_pair(__float_as_uint(sa)), spb = fp8g::fp8_scale_pair(__float_as_uint(sb2));
    tile_x(sb);
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
      const int64_t ch = ch0 + kk;
      if (ch >= work.end) break;  // never an mma past the last chunk of the warp's last slice
      if (ch == switch_ch) switch_chain();
      uint32_t a[4];
      load_a(sb, kk, a);
      const bool in_second = kk >= second;
      uint32_t q[2];  // rows g, g + 8 of chunk kk (fp8_lane)
      ldmatrix_x2(sbase + l.q_chunk(kk) + sb, q[0], q[1]);
      uint32_t b[2][2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        if constexpr (kPath == kFast) {
          b[j][0] = fp8::dequant_fast(q[j], fp8o::kPairLo, in_second ? spb : spa);
          b[j][1] = fp8::dequant_fast(q[j], fp8o::kPairHi, in_second ? spb : spa);
        } else if constexpr (kPath == kBits) {
          b[j][0] = fp8::dequant_bits(q[j], fp8o::kPairLo, in_second ? sb2 : sa);
          b[j][1] = fp8::dequant_bits(q[j], fp8o::kPairHi, in_second ? sb2 : sa);
        } else {
          b[j][0] = fp8::dequant_convert(q[j], false, in_second ? sb2 : sa);
          b[j][1] = fp8::dequant_convert(q[j], true, in_second ? sb2 : sa);
        }
      }
      mma_bf16(acc[0], a, b[0][0], b[0][1]);
      mma_bf16(acc[1], a, b[1][0], b[1][1]);
    }
  };

  const bool allow_fast = f.fast, allow_folded = !f.convert;
  int stage = 0, next_stage = kSt - 1;  // the stages of tile kt and of tile kt + kSt - 1
  auto step = [&](int kt) {
    cp_async_wait<kSt - 2>();  // this lane's copies of tile kt (and, at kt = 0, of the scales) landed
    __syncwarp();              // the warp's have, and every lane is done with tile kt - 1's stage
    if (kt + kSt - 1 < tiles) issue(kt + kSt - 1, next_stage);
    cp_async_commit();

    const int sb = stage * sbytes;
    bool straight = false;
    if (fp8g::is_regular(regular, kt)) {
      const uint32_t s = __float_as_uint(scale(fp8g::regular_slot(kt)));
      const bool fast = allow_fast && fp8g::fp8_scale_fast(s);
      if (fast || (allow_folded && fp8g::fp8_scale_folds(s))) {
        straight = true;
        if (fast)
          regular_tile(std::integral_constant<int, kFast>{}, sb, fp8g::fp8_scale_pair(s), 0.0f);
        else
          regular_tile(std::integral_constant<int, kFolded>{}, sb, 0u, __fmul_rn(__uint_as_float(s), 0x1p120f));
      }
    }
    if (!straight) {
      const int64_t ch0 = work.begin + int64_t{kt} * kChunks;
      // The tile's two scale columns (the same one unless ch0 % 8 != 0) and the first chunk of the second.
      const int i0 = static_cast<int>(ch0 / 8 - run.first);
      const int i1 = static_cast<int>((ch0 + 7) / 8 - run.first) < run.count - 1
                         ? static_cast<int>((ch0 + 7) / 8 - run.first)
                         : run.count - 1;
      const float sa = scale(i0), sb2 = scale(i1);
      const int second = fp8g::first_of_second(ch0);
      if (allow_fast && fp8g::fp8_scale_fast(__float_as_uint(sa)) && fp8g::fp8_scale_fast(__float_as_uint(sb2)))
        general_tile(std::integral_constant<int, kFast>{}, sb, ch0, sa, sb2, second);
      else if (f.convert)
        general_tile(std::integral_constant<int, kConvert>{}, sb, ch0, sa, sb2, second);
      else
        general_tile(std::integral_constant<int, kBits>{}, sb, ch0, sa, sb2, second);
    }
    stage = stage + 1 == kSt ? 0 : stage + 1;
    next_stage = next_stage + 1 == kSt ? 0 : next_stage + 1;
  };
  // The tiles of the first chain, the switch between tiles where the slice boundary starts one, the rest.
  const int before = switch_at >= 0 ? switch_at : tiles;
  int kt = 0;
  for (; kt < before; ++kt) step(kt);
  if (switch_at >= 0) switch_chain();
  for (; kt < tiles; ++kt) step(kt);
  if (p.S == 1) {
    gemv_for_each_acc(lane, acc, [&](int r, int c, float v) {
      if (r < valid_rows && n0w + c < p.N) p.y[(m0 + r) * p.ldy + n0w + c] = v;
    });
    return;
  }
  // The slices' partials meet in the (now idle) stages and are summed in slice order (sum_slices): a
  // two-slice warp's first in `first`, its last (or a one-slice warp's only one) in `acc`.
  cp_async_wait_all();
  __syncthreads();
  auto put_part = [&](int j) {
    return [&, j](int r, int c, float v) {
      *reinterpret_cast<float*>(
          smem + GemvLayout<typename C::Shape>::part_off(p.S, work.group, work.first_slice + j, r, c)) = v;
    };
  };
  if (work.slices == 2) {
    gemv_for_each_acc(lane, first, put_part(0));
    gemv_for_each_acc(lane, acc, put_part(1));
  } else if (work.slices == 1) {
    gemv_for_each_acc(lane, acc, put_part(0));
  }
  __syncthreads();
  gemv_reduce<typename C::Shape>(p, m0, n0, valid_rows, tid,
                                 [&](int off) { return *reinterpret_cast<const float*>(smem + off); });
}

}  // namespace specserve::cuda::kernels::fp8_gemv
