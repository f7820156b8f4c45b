// The launch policy of the streaming matmul for block-scaled fp8 weights and 1 to gemv_max_rows() rows
// (MatmulKernel::Fp8Gemv) and its entry points: which stages, warps a CTA and shared memory a launch takes, and
// the parts of one launch. The kernel, and the history of what each of its versions measured, is in
// matmul_fp8_gemv_kernel.cuh; the shape, layout and fragment code in matmul_fp8_gemv.cuh.
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_gemv_kernel.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;
using fp8_gemv::Fp8Params;
using fp8_gemv::Fp8Part;
using fp8_gemv::kMaxParts;
using fp8_gemv::matmul_fp8_gemv_kernel;
using fp8g::Fp8Gemv;
using fp8g::Fp8Layout;
using fp8g::XMode;

constexpr int kBlockSmemMax = 227 * 1024;

template <class C>
int smem_of(const Fp8Params& f) {
  return Fp8Layout<C>{f.p.a_rows, f.slots}.smem_bytes(f.p.S);
}

// CTAs of C with `smem` bytes that one multiprocessor holds (launch.cuh's ctas_per_sm), the kernel's
// shared-memory attributes set first (once); 0 past the block's shared-memory limit.
template <class C>
int fp8_ctas_per_sm(int smem) {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_fp8_gemv_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmemMax));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_fp8_gemv_kernel<C>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  if (smem > kBlockSmemMax) return 0;
  return specserve::cuda::ctas_per_sm<matmul_fp8_gemv_kernel<C>, C::kThreads>(smem);
}

// The CTAs a multiprocessor the launch needs to run in one wave (each multiprocessor holding as many as the next).
int64_t ctas_wanted_per_sm(const Fp8Params& f) { return ceil_div(f.p.nbn * f.p.nbm, int64_t{sm_count()}); }

// A launch's shared memory: its layout's, padded where more CTAs than the grid needs would fit one multiprocessor
// (smem_for_at_most: with the swizzled 16-row stages 3 CTAs of 3 stages fit, and the 8B's 256-CTA launches at 16 rows
// ran 11-15 % slower, packed 3 on some multiprocessors, than at 2 on each; capped, H100: q/o 12.6 -> 11.2 µs, down
// 32.8 -> 27.7, the 8B fp8 verify of 16 rows 5.38 / 5.41 -> 5.15 / 5.20 ms; decode unchanged).
template <class C>
int launch_smem(const Fp8Params& f) {
  const int smem = smem_of<C>(f);
  const int64_t wanted = ctas_wanted_per_sm(f);
  if (wanted >= fp8_ctas_per_sm<C>(smem)) return smem;
  const int padded = smem_for_at_most(smem, static_cast<int>(wanted), kBlockSmemMax);
  return fp8_ctas_per_sm<C>(padded) >= 1 ? padded : smem;
}

template <class C>
void launch(const Fp8Params& f, cudaStream_t stream) {
  const int smem = launch_smem<C>(f);
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

template <XMode X, int W, class Fn>
auto with_stages(int stages, Fn fn) {
  switch (stages) {
    case 3: return fn(Fp8Gemv<3, X, W>{});
    case 4: return fn(Fp8Gemv<4, X, W>{});
    case 6: return fn(Fp8Gemv<6, X, W>{});
    default: return fn(Fp8Gemv<8, X, W>{});
  }
}

// Stages per warp: first the most CTAs a multiprocessor (of those the launch has for one: warps hide this
// kernel's latency), then (x as f32 or 8 bf16 rows) the deeper ring (the tiles a warp keeps in flight: stages - 1, at
// most its run). `forced` (3, 4, 6, 8) wins where it fits. Until session 32 a 4-warp launch took the most code tiles in
// flight (CTAs times depth): at 16 rows of x (a stage holds 2 KB of codes and a 4 KB x tile) that was 8 stages and one
// CTA a multiprocessor, 4 warps, and the 8B's o projection ran in 17.2 µs against 9.7 at one row, where the
// same rule gave 2-3 CTAs; 2 CTAs of 8 warps with 3-4 stages keep ~100 KB of codes in flight.
template <XMode X, int W>
int fp8_stages_for(const Fp8Params& f, int forced) {
  auto fits = [&](int st) {
    return with_stages<X, W>(st, [&](auto c) { return fp8_ctas_per_sm<decltype(c)>(smem_of<decltype(c)>(f)); });
  };
  if (forced != 0) return fits(forced) > 0 ? forced : 3;
  const int64_t per_sm_wanted = ctas_wanted_per_sm(f);
  int64_t run_tiles = 0;  // a warp's longest run
  for (int i = 0; i < f.parts; ++i) {
    const int64_t t = ceil_div(int64_t{gemv_shape(f.part[i].S, W).spw} * f.part[i].cps * kMmaK, 128);
    run_tiles = t > run_tiles ? t : run_tiles;
  }
  int best = 3;
  int64_t best_score = -1;
  for (int st : kStageCounts) {
    const int64_t per_sm = fits(st);
    if (per_sm < 1) continue;
    const int64_t resident = per_sm < per_sm_wanted ? per_sm : per_sm_wanted;
    const int64_t depth = st - 1 < run_tiles ? st - 1 : run_tiles;
    // With x's 16-row bf16 copy the ring's depth is the tie-break's loser: of the rings with the most CTAs the
    // shallowest, measured 2-6 % faster than the deepest on the 8B's four launches and the 27B's o at 16 rows
    // (1-2 % slower on the 27B's gate+up and down; docs/history/BENCHMARKS-log.md, session 35).
    const int64_t score = resident * 64 + (X == XMode::Xb16 ? -depth : depth);
    if (score > best_score || (X != XMode::Xb16 && score == best_score)) best = st, best_score = score;
  }
  return best;
}

bool aligned16(const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) == 0; }

template <XMode X, int W>
void run(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force) {
  using G = typename Fp8Gemv<3, X, W>::Shape;
  const MatmulArgs& a0 = parts[0];
  Fp8Params f;
  f.p = make_gemv_params<G>(a0.x, a0.ldx, nullptr, a0.K, nullptr, 0, a0.M, a0.N, a0.K);
  int64_t blocks = 0;
  f.slots = 0;
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
    const KSplit split = k_split(a.N, a.K, split_target_ctas());
    w.S = split.S;
    w.cps = split.cps;
    blocks += ceil_div(a.N, gemv_shape(w.S, G::kWarps).columns());
    w.nbn_end = blocks;
    const int slots = fp8g::scale_slots(w.S, w.cps, G::kWarps);
    f.slots = slots > f.slots ? slots : f.slots;
    if (w.S > f.p.S) f.p.S = w.S, f.p.cps = w.cps;  // the most slices: the most partial tiles (smem_of)
  }
  f.parts = count;
  f.p.nbn = blocks;
  f.early_w = force.early_w != 0;
  f.fast = force.fast != 0;
  f.convert = force.convert == 1;
  f.regular = force.regular != 0;
  if constexpr (X != XMode::F32) {
    f.p.ldxb = xb_pitch(a0.K, G::kKT);
    if (a0.xb != nullptr && a0.ldxb == f.p.ldxb) {
      f.p.xb = a0.xb;  // x's producer wrote the copy (kernels.h: XbOut)
      matmul_count_xb_reused();
    } else {
      f.p.xb = matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, f.p.ldxb, stream);
    }
  }
  with_stages<X, W>(fp8_stages_for<X, W>(f, force.stages), [&](auto c) { launch<decltype(c)>(f, stream); });
}

// Warps a CTA for one row of f32 x (decode of one sequence): 8 where the 8-warp grid, at 2 CTAs a
// multiprocessor, is one wave or fills its last wave to 90 % or more; else 4 (also from 2 rows on). Measured on
// the H200 at one row (bench_cuda_matmul BM_MatmulFp8, session 31), 8 warps against 4: the 8B's o and down
// projections (256 CTAs: 0.97 of a wave) 9.69 -> 8.46 and 22.1 -> 20.1 µs, gate+up (768: 2.91 waves) 42.8 ->
// 40.6 µs; but the 8B's q+k+v (384: 1.45 waves) 11.7 -> 13.5, the 27B's o and down (320: 1.21) 12.5 -> 14.4
// and 36.4 -> 38.0, its gate+up (544: 2.06) 70.5 -> 72.0 µs; at 4 rows the 8B's o and down 11.6 -> 14.4 and
// 27.4 -> 31.8 µs. The rule picks the faster of the two in each of these: with it (session 32, same call as
// main) the 8B's o 9.68 -> 8.51, down 21.9 -> 19.8, gate+up 42.3 -> 40.1 µs, the others unchanged; the 8B fp8
// decode of one sequence 4.27 -> 3.87 ms, the 27B's 12.85 -> 12.77 ms.
int fp8_warps_for(const MatmulArgs* parts, int count) {
  if (parts[0].M != 1) return 4;
  int64_t ctas = 0;
  for (int i = 0; i < count; ++i)
    ctas += ceil_div(parts[i].N, gemv_shape(k_split(parts[i].N, parts[i].K, split_target_ctas()).S, 8).columns());
  const double waves = static_cast<double>(ctas) / static_cast<double>(2 * sm_count());
  const double last = waves - static_cast<double>(static_cast<int64_t>(waves));
  return waves <= 1.0 || last == 0.0 || last >= 0.9 ? 8 : 4;
}

void run_any(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force) {
  switch (fp8g::x_mode(parts[0].M, gemv_xb_rows())) {
    case XMode::F32: {
      const int warps = force.warps == 4 || force.warps == 8 ? force.warps : fp8_warps_for(parts, count);
      return warps == 8 ? run<XMode::F32, 8>(parts, count, stream, force)
                        : run<XMode::F32, 4>(parts, count, stream, force);
    }
    case XMode::Xb8: return run<XMode::Xb8, 4>(parts, count, stream, force);
    case XMode::Xb16: return run<XMode::Xb16, 4>(parts, count, stream, force);
  }
}

}  // namespace

bool matmul_fp8_gemv_compatible(const MatmulArgs* parts, int count) {
  if (count < 1 || count > kMaxParts) return false;
  const MatmulArgs& a0 = parts[0];
  if (a0.M <= 0 || a0.M > gemv_max_rows() || a0.K <= 0) return false;
  for (int i = 0; i < count; ++i) {
    const MatmulArgs& a = parts[i];
    if (a.w_scales == nullptr || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K || a.N <= 0) return false;
  }
  return true;
}

void matmul_fp8_gemv_multi(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force) {
  if (count >= 1 && (parts[0].M <= 0 || parts[0].K <= 0)) return;
  if (!matmul_fp8_gemv_compatible(parts, count))
    cuda_fail(cudaErrorInvalidValue, "matmul_fp8_gemv: not fp8 weights of at most 32 rows sharing x", __FILE__,
              __LINE__);
  run_any(parts, count, stream, force);
}

void matmul_fp8_gemv(const MatmulArgs& a, cudaStream_t stream, Fp8GemvForce force) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;
  matmul_fp8_gemv_multi(&a, 1, stream, force);
}

}  // namespace specserve::cuda::kernels
