// The streaming matmul for block-scaled fp8 weights and few rows (decode and verify, 1 to gemv_max_rows()
// rows: MatmulKernel::Fp8Gemv): y[M, N] = x[M, K] · dequant(w)[N, K]ᵀ, the weights read once as e4m3 (half
// the bytes of bf16) with their block scales, for one weight or up to four sharing x and the K split
// (q/k/v, gate/up) in one launch. matmul_fp8_gemv.cuh has the shape, the layout, the fragment code and why
// every result has the bits of the bf16 gemv kernel on the bf16 dequantisation (so a row's bits do not
// depend on M).
//
// What the first version of this kernel (git: f2bb60e) did and this one does not, each a measured or
// counted cost on an H200 (8B decode 8.22 ms against 5.0 in bf16, 24 % of its copy roofline):
//   - bytes in flight: 2 KB code tiles with 3-4 stages per warp and no weight loads before the wait for
//     the previous kernel; now up to 8 stages (14 KB per warp in flight), the first tiles' codes and every
//     block scale issued before pdl_wait, and q/k/v or gate/up in one launch (the 1024-row k and v
//     projections alone were 64 CTAs on 132 multiprocessors);
//   - a dependent global load of the block scale for each of a lane's four pieces in every tile, after the
//     tile's wait: now the scales of the warp's whole run arrive with the first stage;
//   - per element the e4m3 conversion instruction, a round trip of the dequantised tile through shared
//     memory (16 B stores, a warp barrier, ldmatrix) and per-piece bounds arithmetic: now two 4-byte shared
//     loads and a byte permute per four codes build the B fragments in registers, the bf16-scale tiles
//     multiply in bf16x2 (no conversion at all), and whole tiles load without bounds checks.
//
// Stages (matmul_fp8_gemv.cuh: any count has the same bits) are chosen per launch for the most code bytes in
// flight per multiprocessor (fp8_stages_for); tests force them, the early loads and the dequantisation path
// (Fp8GemvForce) to check that the bits never change.
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_gemv.cuh"
#include "backend/cuda/matmul_fp8_math.cuh"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_rows.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"

namespace specserve::cuda::kernels {

namespace {

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
  int64_t nbn_end = 0;
};

// A launch: the gemv Params of x and the split (x, M, K, S, cps, a_rows, vec_x, xb, nbm, nbn over all parts;
// its w, y and N are the parts'), the parts, and the choices tests may force.
struct Fp8Params {
  Params p;
  Fp8Part part[kMaxParts];
  int parts = 1;
  int slots = 0;         // scale slots per warp (fp8g::scale_slots)
  bool early_w = true;   // the first tiles' codes before pdl_wait
  bool fast = true;      // tiles with bf16 scales: the bf16x2 multiply
  bool convert = false;  // other tiles: the conversion path (else the bit path)
};

enum Path { kFast = 0, kBits = 1, kConvert = 2 };

__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, 3) matmul_fp8_gemv_kernel(const Fp8Params f) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = smem_addr(smem);
  constexpr bool kXb = C::kX != XMode::F32;
  constexpr int kSt = C::kStages;

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

  const Fp8Layout<C> lay{p.a_rows, f.slots};
  const GemvShape shape = gemv_shape(p.S);
  const GemvWork work = gemv_work(p, warp);
  const int64_t n0 = block * shape.columns(), n0w = n0 + work.group * C::kWarpN;
  const int64_t m0 = int64_t{blockIdx.x % p.nbm} * C::kBM;
  const int valid_rows = p.M - m0 < C::kBM ? static_cast<int>(p.M - m0) : C::kBM;
  const int tiles = static_cast<int>(work.tiles(C::kKT));
  const Fp8Lane<C> l = fp8g::fp8_lane(lay, warp, lane, n0w, w.ldq, work.begin, m0, kXb ? p.ldxb : p.ldx, valid_rows);
  const fp8g::ScaleRun run = fp8g::scale_run(work);

  auto st_f32 = [&](int off, float v) { *reinterpret_cast<float*>(smem + off) = v; };
  auto cp16_x = [&](int off, const float* src, int bytes) { copy_piece<true>(sbase, smem, off, src, bytes); };
  auto lds = [&](int off) { return *reinterpret_cast<const uint32_t*>(smem + off); };

  // Tile t covers k from work.begin * 16 + 128 t. Whole: 16-byte loads, all 16 rows below N, all 128 k below K.
  auto whole = [&](int t) {
    return w.vec_q && (kXb || p.vec_x) && n0w + C::kWarpN <= p.N && work.begin * kMmaK + int64_t{t + 1} * C::kKT <= p.K;
  };
  auto issue_q_whole = [&](int t) {
    const int sb = (t % kSt) * lay.stage_bytes();
    const uint8_t* src = w.q + l.q_src + int64_t{t} * C::kKT;
#pragma unroll
    for (int j = 0; j < 4; ++j) cp_async_cg(sbase + l.q_dst + sb + j * 4 * C::kSQ, src + j * 4 * w.ldq, 16);
  };
  auto issue_x_whole = [&](int t) {
    const int sb = (t % kSt) * lay.stage_bytes();
    if constexpr (kXb) {
      const uint16_t* x = p.xb + l.x_src + int64_t{t} * C::kKT;
#pragma unroll
      for (int i = 0; i < C::kXbRows / 2; ++i)
        cp_async_ca(sbase + l.x_dst + sb + 2 * i * C::kSB * 2, x + 2 * i * p.ldxb, 16);
    } else {
      const float* x = p.x + l.x_src + int64_t{t} * C::kKT;
      for (int r = 0; r < valid_rows; ++r) cp_async_ca(sbase + l.x_dst + sb + r * C::kSA * 4, x + r * p.ldx, 16);
    }
  };
  // Any tile: codes zero past N and K (a piece cut by K is written byte by byte), x as the gemv kernel.
  auto issue_general = [&](int t) {
    const int stage = t % kSt;
    const int64_t k0 = work.begin * kMmaK + int64_t{t} * C::kKT;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = lane + 32 * j, r = i / 8, c = (i % 8) * 16;
      const int64_t n = n0w + r, k = k0 + c;
      const int bytes = n >= p.N || k >= p.K ? 0 : p.K - k >= 16 ? 16 : static_cast<int>(p.K - k);
      const int off = lay.q_off(warp, stage, r, c);
      if (bytes == 16 && w.vec_q) {
        cp_async_cg(sbase + off, w.q + n * w.ldq + k, 16);
      } else {
        const uint8_t* src = w.q + (bytes ? n * w.ldq + k : 0);
#pragma unroll 1
        for (int e = 0; e < 16; ++e) smem[off + e] = e < bytes ? src[e] : uint8_t{0};
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
  auto issue = [&](int t) {
    if (whole(t)) {
      issue_q_whole(t);
      issue_x_whole(t);
    } else {
      issue_general(t);
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
    if (whole(t)) issue_q_whole(t);
  pdl_wait();
  pdl_launch_dependents();
#pragma unroll 1
  for (int t = 0; t < kSt - 1; ++t) {
    if (t < early && whole(t))
      issue_x_whole(t);
    else if (t < tiles)
      issue(t);
    cp_async_commit();
  }

  float acc[2][2][4] = {};
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<kSt - 2>();  // this lane's copies of tile kt (and, at kt = 0, of the scales) landed
    __syncwarp();              // the warp's have, and every lane is done with tile kt - 1's stage
    if (kt + kSt - 1 < tiles) issue(kt + kSt - 1);
    cp_async_commit();

    const int sb = (kt % kSt) * lay.stage_bytes();
    const int64_t ch0 = work.begin + int64_t{kt} * C::kChunks;
    // The tile's two scale columns (the same one unless ch0 % 8 != 0) and the first chunk of the second.
    const int i0 = static_cast<int>(ch0 / 8 - run.first);
    const int i1 = static_cast<int>((ch0 + 7) / 8 - run.first) < run.count - 1
                       ? static_cast<int>((ch0 + 7) / 8 - run.first)
                       : run.count - 1;
    const float sa = *reinterpret_cast<const float*>(smem + lay.sc_off(warp, i0));
    const float sb2 = *reinterpret_cast<const float*>(smem + lay.sc_off(warp, i1));
    const int second = fp8g::first_of_second(ch0);
    const bool fast = f.fast && fp8g::fp8_scale_fast(__float_as_uint(sa)) && fp8g::fp8_scale_fast(__float_as_uint(sb2));
    const uint32_t spa = fp8g::fp8_scale_pair(__float_as_uint(sa)), spb = fp8g::fp8_scale_pair(__float_as_uint(sb2));

    auto tile = [&](auto path) {
      constexpr int kPath = decltype(path)::value;
#pragma unroll
      for (int kk = 0; kk < C::kChunks; ++kk) {
        const int64_t ch = ch0 + kk;
        if (ch >= work.end) break;  // never an mma past the last chunk of the warp's last slice
        uint32_t a[4];
        const int ao = l.a_off + sb + kk * kMmaK * (kXb ? 2 : 4);
        if constexpr (C::kX == XMode::Xb16) {
          ldmatrix_x4(sbase + ao, a[0], a[1], a[2], a[3]);
        } else if constexpr (C::kX == XMode::Xb8) {
          ldmatrix_x2(sbase + ao, a[0], a[2]);
          a[1] = a[3] = 0u;  // rows 8-15 are past M
        } else {
          const float2 lo = *reinterpret_cast<const float2*>(smem + ao);
          const float2 hi = *reinterpret_cast<const float2*>(smem + ao + 32);
          const uint32_t a0 = pack_bf16x2(lo.x, lo.y), a2 = pack_bf16x2(hi.x, hi.y);
          a[0] = l.a_row ? a0 : 0u;
          a[2] = l.a_row ? a2 : 0u;
          a[1] = a[3] = 0u;  // rows 8-15 are past M (at most 4 rows)
        }
        const bool in_second = kk >= second;
        uint32_t b[2][2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int off = l.q_rd + sb + j * 8 * C::kSQ + kk * kMmaK;
          const uint32_t w0 = lds(off), w1 = lds(off + 8);
          if constexpr (kPath == kFast) {
            fp8::dequant_pair_fast(fp8g::prmt(w0, w1, l.sel), in_second ? spb : spa, b[j][0], b[j][1]);
          } else if constexpr (kPath == kBits) {
            fp8::dequant_pair_bits(fp8g::prmt(w0, w1, l.sel), in_second ? sb2 : sa, b[j][0], b[j][1]);
          } else {
            const float s = in_second ? sb2 : sa;
            b[j][0] = fp8::dequant2_bf16(static_cast<uint16_t>(w0 >> l.shift), s);
            b[j][1] = fp8::dequant2_bf16(static_cast<uint16_t>(w1 >> l.shift), s);
          }
        }
        if (ch < work.split) {  // the chunk's slice picks its chain
          mma_bf16(acc[0][0], a, b[0][0], b[0][1]);
          mma_bf16(acc[0][1], a, b[1][0], b[1][1]);
        } else {
          mma_bf16(acc[1][0], a, b[0][0], b[0][1]);
          mma_bf16(acc[1][1], a, b[1][0], b[1][1]);
        }
      }
    };
    if (fast)
      tile(std::integral_constant<int, kFast>{});
    else if (f.convert)
      tile(std::integral_constant<int, kConvert>{});
    else
      tile(std::integral_constant<int, kBits>{});
  }
  if (p.S == 1) {
    gemv_for_each_acc(lane, acc[0], [&](int r, int c, float v) {
      if (r < valid_rows && n0w + c < p.N) p.y[(m0 + r) * p.ldy + n0w + c] = v;
    });
    return;
  }
  // The slices' partials meet in the (now idle) stages and are summed in slice order (sum_slices).
  cp_async_wait_all();
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (j >= work.slices) break;
    gemv_for_each_acc(lane, acc[j], [&](int r, int c, float v) {
      *reinterpret_cast<float*>(
          smem + GemvLayout<typename C::Shape>::part_off(p.S, work.group, work.first_slice + j, r, c)) = v;
    });
  }
  __syncthreads();
  gemv_reduce<typename C::Shape>(p, m0, n0, valid_rows, tid,
                                 [&](int off) { return *reinterpret_cast<const float*>(smem + off); });
}

constexpr int kBlockSmemMax = 227 * 1024;

template <class C>
int smem_of(const Fp8Params& f) {
  return Fp8Layout<C>{f.p.a_rows, f.slots}.smem_bytes(f.p.S);
}

// CTAs of C with `smem` bytes that one multiprocessor holds (launch.cuh's ctas_per_sm), the kernel's
// shared-memory attributes set first (once); 0 past the block's shared-memory limit.
template <class C>
int fp8_ctas_per_sm(int smem) {
  static const bool configured = [] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_fp8_gemv_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmemMax));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_fp8_gemv_kernel<C>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  if (smem > kBlockSmemMax) return 0;
  return specserve::cuda::ctas_per_sm<matmul_fp8_gemv_kernel<C>, C::kThreads>(smem);
}

template <class C>
void launch(const Fp8Params& f, cudaStream_t stream) {
  const int smem = smem_of<C>(f);
  if (fp8_ctas_per_sm<C>(smem) < 1)
    cuda_fail(cudaErrorInvalidConfiguration, "fp8 gemv: shared memory", __FILE__, __LINE__);
  if (f.p.nbn * f.p.nbm > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_pdl(matmul_fp8_gemv_kernel<C>, static_cast<unsigned>(f.p.nbn * f.p.nbm), C::kThreads,
             static_cast<size_t>(smem), stream, f);
  CUDA_CHECK_LAUNCH();
}

// The stage counts a launch may take (each a kernel instance).
constexpr int kStageCounts[] = {3, 4, 6, 8};

template <XMode X, class Fn>
auto with_stages(int stages, Fn fn) {
  switch (stages) {
    case 3: return fn(Fp8Gemv<3, X>{});
    case 4: return fn(Fp8Gemv<4, X>{});
    case 6: return fn(Fp8Gemv<6, X>{});
    default: return fn(Fp8Gemv<8, X>{});
  }
}

// Stages per warp: the count that keeps the most code tiles in flight per multiprocessor, counting the CTAs
// the launch puts on one (at most what fits) times the tiles a warp keeps in flight (stages - 1, at most its
// run); on a tie the deeper ring. `forced` (3, 4, 6, 8) wins where it fits.
template <XMode X>
int fp8_stages_for(const Fp8Params& f, int forced) {
  auto fits = [&](int st) {
    return with_stages<X>(st, [&](auto c) { return fp8_ctas_per_sm<decltype(c)>(smem_of<decltype(c)>(f)); });
  };
  if (forced != 0) return fits(forced) > 0 ? forced : 3;
  const int64_t ctas = f.p.nbn * f.p.nbm, sms = sm_count();
  const int64_t per_sm_wanted = ceil_div(ctas, sms);
  const int64_t run_tiles = ceil_div(int64_t{gemv_shape(f.p.S).spw} * f.p.cps * kMmaK, 128);
  int best = 3;
  int64_t best_score = -1;
  for (int st : kStageCounts) {
    const int64_t per_sm = fits(st);
    if (per_sm < 1) continue;
    const int64_t score = (per_sm < per_sm_wanted ? per_sm : per_sm_wanted) * (st - 1 < run_tiles ? st - 1 : run_tiles);
    if (score >= best_score) best = st, best_score = score;
  }
  return best;
}

bool aligned16(const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) == 0; }

template <XMode X>
void run(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force) {
  using G = Gemv<2, X != XMode::F32>;
  const MatmulArgs& a0 = parts[0];
  Fp8Params f;
  f.p = make_gemv_params<G>(a0.x, a0.ldx, nullptr, a0.K, nullptr, 0, a0.M, a0.N, a0.K);
  const int columns = gemv_shape(f.p.S).columns();
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    Fp8Part& w = f.part[i];
    w.q = static_cast<const uint8_t*>(a.w);
    w.ldq = a.ldw;
    w.vec_q = aligned16(a.w) && (a.N == 1 || a.ldw % 16 == 0);
    w.scales = a.w_scales;
    w.scale_ld = a.scale_ld;
    w.y = a.y;
    w.ldy = a.ldy;
    w.N = a.N;
    blocks += ceil_div(a.N, columns);
    w.nbn_end = blocks;
  }
  f.parts = count;
  f.p.nbn = blocks;
  f.slots = fp8g::scale_slots(f.p.S, f.p.cps);
  f.early_w = force.early_w != 0;
  f.fast = force.fast != 0;
  f.convert = force.convert == 1;
  if constexpr (X != XMode::F32) {
    f.p.ldxb = xb_pitch(a0.K, G::kKT);
    if (a0.xb != nullptr && a0.ldxb == f.p.ldxb) {
      f.p.xb = a0.xb;  // x's producer wrote the copy (kernels.h: XbOut)
      matmul_count_xb_reused();
    } else {
      f.p.xb = matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, f.p.ldxb, stream);
    }
  }
  with_stages<X>(fp8_stages_for<X>(f, force.stages), [&](auto c) { launch<decltype(c)>(f, stream); });
}

void run_any(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force) {
  switch (fp8g::x_mode(parts[0].M, gemv_xb_rows())) {
    case XMode::F32: return run<XMode::F32>(parts, count, stream, force);
    case XMode::Xb8: return run<XMode::Xb8>(parts, count, stream, force);
    case XMode::Xb16: return run<XMode::Xb16>(parts, count, stream, force);
  }
}

}  // namespace

bool matmul_fp8_gemv_compatible(const MatmulArgs* parts, int count) {
  if (count < 1 || count > kMaxParts) return false;
  const MatmulArgs& a0 = parts[0];
  if (a0.M <= 0 || a0.M > gemv_max_rows() || a0.K <= 0) return false;
  const KSplit split = k_split(a0.N, a0.K, split_target_ctas());
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    const KSplit si = k_split(a.N, a.K, split_target_ctas());
    if (a.w_scales == nullptr || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K || a.N <= 0 ||
        si.S != split.S || si.cps != split.cps)
      return false;
  }
  return true;
}

void matmul_fp8_gemv_multi(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force) {
  if (count >= 1 && (parts[0].M <= 0 || parts[0].K <= 0)) return;
  if (!matmul_fp8_gemv_compatible(parts, count))
    cuda_fail(cudaErrorInvalidValue, "matmul_fp8_gemv: not fp8 weights of at most 32 rows sharing x and the split",
              __FILE__, __LINE__);
  run_any(parts, count, stream, force);
}

void matmul_fp8_gemv(const MatmulArgs& a, cudaStream_t stream, Fp8GemvForce force) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;
  matmul_fp8_gemv_multi(&a, 1, stream, force);
}

}  // namespace specserve::cuda::kernels
