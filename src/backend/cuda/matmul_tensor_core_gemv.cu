// The warp-split streaming bf16 tensor-core matmul (matmul_tensor_core_gemv.cuh has the shape, the
// layout and the reasons): y[M, N] = x[M, K] · w[N, K]ᵀ for few rows (16 per CTA, up to gemv_max_rows()
// in all), the weights read once.
// The numerics contract is the one heading matmul_tensor_core.cu.
//
// Bytes in flight: each warp keeps kStages - 1 weight tiles of 4 KB in flight; at M = 1 a CTA with
// 3 stages takes 59 KB of shared memory (3 CTAs, 96 KB in flight per SM). A 4096 x 4096 matrix
// (S = 8) runs as 256 CTAs of 16 columns, each warp streaming 32 KB. The main loop only adds offsets
// precomputed per lane (GemvLane): it was bound by instruction issue before.
#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>

#include <climits>
#include <cstdlib>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

template <class G>
__global__ void __launch_bounds__(G::kThreads, 2) matmul_tc_gemv_kernel(const Params launch) {
  // The CTAs of one column block's 16-row blocks are adjacent (x = column block * nbm + row block), so
  // they run together and the later ones read the weights from L2, not DRAM.
  int64_t block = blockIdx.x / launch.nbm;
  const Params p = segment_of(launch, block);
  extern __shared__ __align__(128) unsigned char smem[];
  const GemvLayout<G> lay{p.a_rows};
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = smem_addr(smem);
  constexpr int kChunks = G::kKT / kMmaK;

  auto st_f32 = [&](int off, float v) { *reinterpret_cast<float*>(smem + off) = v; };
  auto st_b16 = [&](int off, uint16_t v) { *reinterpret_cast<uint16_t*>(smem + off) = v; };
  // (x's bf16 copy is always loaded in whole pieces.)
  auto cp16_x = [&](int off, const auto* src, int bytes) { copy_piece<true>(sbase, smem, off, src, bytes); };
  auto cp16_w = [&](int off, const uint16_t* src, int bytes) { copy_piece<false>(sbase, smem, off, src, bytes); };
  auto cvt2 = [&](int off) {
    const float2 v = *reinterpret_cast<const float2*>(smem + off);
    return pack_bf16x2(v.x, v.y);
  };

  const GemvShape shape = gemv_shape(p.S, G::kWarps);
  const GemvWork work = gemv_work(p, warp, G::kWarps);
  const int64_t n0 = block * shape.columns(), n0w = n0 + work.group * G::kWarpN;
  const int64_t m0 = int64_t{blockIdx.x % launch.nbm} * G::kBM;
  const int valid_rows = p.M - m0 < G::kBM ? static_cast<int>(p.M - m0) : G::kBM;
  const int tiles = static_cast<int>(work.tiles(G::kKT));
  const GemvLane l = gemv_lane(p, lay, work, warp, lane, n0w, m0, valid_rows);
  auto cp_w_whole = [&](int off, const uint16_t* src) { cp_async_cg(sbase + off, src, 16); };
  auto cp_x_whole = [&](int off, const auto* src) { cp_async_ca(sbase + off, src, 16); };
  auto issue = [&](int t) {
    if (gemv_tile_whole<G>(p, work, n0w, t))
      gemv_load_whole<G>(p, lay, l, valid_rows, t, cp_x_whole, cp_w_whole);
    else
      gemv_load_stage<G>(p, lay, work, warp, n0w, m0, t, lane, cp16_x, cp16_w, st_f32, st_b16);
  };

  // Until here nothing read memory: the previous kernel may still be running (launch.cuh). The first
  // whole tiles' weights may be loaded now (launch.cuh: no kernel writes weights while a successor may
  // run), so the stream's first round trip overlaps the previous kernel (a norm, attention or swiglu
  // between two matmuls) instead of following it. (An L2 prefetch of them measured no gain in session 6:
  // docs/history/GPU_PERF_NOTES.md.) x is the previous kernel's output and waits.
  const int early = p.early_w ? (tiles < G::kStages - 1 ? tiles : G::kStages - 1) : 0;
  for (int t = 0; t < early; ++t)
    if (gemv_tile_whole<G>(p, work, n0w, t)) gemv_load_whole_w<G>(p, lay, l, t, cp_w_whole);
  pdl_wait();
  pdl_launch_dependents();

  float acc[G::kMaxSlicesPerWarp][2][4] = {};
#pragma unroll
  for (int t = 0; t < G::kStages - 1; ++t) {
    // (A tile's weights issued above join the commit group of its x, or of an earlier tile.)
    if (t < early && gemv_tile_whole<G>(p, work, n0w, t))
      gemv_load_whole_x<G>(p, lay, l, valid_rows, t, cp_x_whole);
    else if (t < tiles)
      issue(t);
    cp_async_commit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<G::kStages - 2>();  // this lane's copies of tile kt landed
    __syncwarp();                     // the warp's have, and every lane is done with tile kt - 1's stage
    if (kt + G::kStages - 1 < tiles) issue(kt + G::kStages - 1);
    cp_async_commit();

    const int stage = kt % G::kStages;
    const int64_t chunk0 = work.begin + int64_t{kt} * kChunks;
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
      const int64_t c = chunk0 + kk;
      if (c >= work.end) break;  // never an mma past the last chunk of the warp's last slice
      uint32_t b0, b1, b2, b3, a[4];
      ldmatrix_x4(sbase + gemv_b_off(lay, l, stage, kk), b0, b1, b2, b3);
      gemv_gather_a(lay, l, stage, kk, a, cvt2,
                    [&](int off, uint32_t(&r)[4]) { ldmatrix_x4(sbase + off, r[0], r[1], r[2], r[3]); });
      if (c < work.split) {  // the chunk's slice picks its chain
        mma_bf16(acc[0][0], a, b0, b1);
        mma_bf16(acc[0][1], a, b2, b3);
      } else {
        mma_bf16(acc[1][0], a, b0, b1);
        mma_bf16(acc[1][1], a, b2, b3);
      }
    }
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
  for (int j = 0; j < G::kMaxSlicesPerWarp; ++j) {
    if (j >= work.slices) break;
    gemv_for_each_acc(lane, acc[j], [&](int r, int c, float v) {
      *reinterpret_cast<float*>(smem + GemvLayout<G>::part_off(p.S, work.group, work.first_slice + j, r, c)) = v;
    });
  }
  __syncthreads();
  gemv_reduce<G>(p, m0, n0, valid_rows, tid, [&](int off) { return *reinterpret_cast<const float*>(smem + off); });
}

// Shared memory an sm_90 block may have (the opt-in maximum; a multiprocessor holds 228 KB in all).
constexpr int kBlockSmemMax = 227 * 1024;

template <class G>
void launch_gemv(const Params& p, cudaStream_t stream) {
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_tc_gemv_kernel<G>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmemMax));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_gemv_kernel<G>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  if (p.nbn * p.nbm > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_pdl(matmul_tc_gemv_kernel<G>, static_cast<unsigned>(p.nbn * p.nbm), G::kThreads,
             static_cast<size_t>(GemvLayout<G>{p.a_rows}.smem_bytes(p.S)), stream, p);
}

// Params of one launch (one weight, or up to 4 sharing x, M, K and the split as segments); with Xb
// this enqueues x's bf16 copy first, unless x's producer wrote it (MatmulArgs::xb).
std::atomic<uint64_t>& xb_reused() {
  static std::atomic<uint64_t> n{0};
  return n;
}

template <class G>
Params gemv_params(const MatmulArgs* parts, int count, cudaStream_t stream) {
  WeightPart gp[Params::kMaxSegments];
  weight_parts(parts, count, gp);
  const MatmulArgs& a0 = parts[0];
  Params p = make_gemv_multi_params<G>(a0.x, a0.ldx, a0.M, a0.K, gp, count);
  if constexpr (G::kXb) {
    p.ldxb = xb_pitch(a0.K, G::kKT);
    if (a0.xb != nullptr && a0.ldxb == p.ldxb) {
      p.xb = a0.xb;  // x's producer wrote the copy (kernels.h: XbOut)
      xb_reused().fetch_add(1, std::memory_order_relaxed);
    } else {
      p.xb = matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, p.ldxb, stream);
    }
  }
  return p;
}

// Stages per warp (any count has the same bits). With one to four rows (f32 x), 2 stages: 3, 4 or 5
// made the 8B decode 1.5-5 % slower, also for the launches every CTA of which is resident at once
// (q/k/v, o, down), where more stages only add bytes in flight (session 10) — but not a launch of a few
// CTAs (a quarter of the multiprocessors or fewer), whose CTAs each stream their weights with one tile a warp in
// flight: it takes the most stages, as below (session 48). From 5 rows (x's bf16
// copy, 8.5 KB a stage and warp), more stages pay where they cost no CTAs: when the launch takes more
// than one wave, the CTAs per multiprocessor decide (3 stages made the verify of 4-16 rows 8-17 %
// slower in session 8); when one wave holds it, the most stages (up to kGemvMaxStages) with which it still
// does: the 8B verify of 16 rows 6.56 -> 6.39 ms (docs/DECISIONS.md, matmul). Tests fix the count
// (GemvForce) to check that every count has the same bits.
constexpr int kGemvMaxStages = 4;
// With f32 x, a launch of at most 1 / kGemvFewCtas CTAs a multiprocessor takes the most stages too.
constexpr int64_t kGemvFewCtas = 4;
// The first tiles' weights are loaded before the wait for the previous kernel (launch.cuh; tests turn
// it off through GemvForce to check the bits are the same).
constexpr bool kGemvEarlyW = true;

template <int St, bool Xb>
int gemv_smem(const Params& p) {
  return GemvLayout<Gemv<St, Xb>>{p.a_rows}.smem_bytes(p.S);
}
// How many CTAs of `stages` stages the device holds at once (0 when one does not fit).
template <bool Xb>
int64_t gemv_resident(const Params& p, int stages) {
  auto held = [&](auto st) -> int64_t {
    constexpr int S = decltype(st)::value;
    const int smem = gemv_smem<S, Xb>(p);
    return smem > kBlockSmemMax
               ? 0
               : int64_t{ctas_per_sm<matmul_tc_gemv_kernel<Gemv<S, Xb>>, Gemv<S, Xb>::kThreads>(smem)} * sm_count();
  };
  switch (stages) {
    case 2: return held(std::integral_constant<int, 2>{});
    case 3: return held(std::integral_constant<int, 3>{});
    case 4: return held(std::integral_constant<int, 4>{});
    case 5: return held(std::integral_constant<int, 5>{});
    default: return 0;
  }
}
template <bool Xb>
int gemv_stages_for(const Params& p, int forced) {
  if (forced >= 2 && forced <= 5) return gemv_resident<Xb>(p, forced) > 0 ? forced : 2;
  const int64_t ctas = p.nbn * p.nbm;
  // A launch of a few CTAs (Qwen3.5's in_proj_b / a beside fp8 weights: 6 CTAs of 160 KB) is bound by each
  // one's bytes in flight, not by DRAM: the most stages, with f32 x too.
  if (!Xb && ctas * kGemvFewCtas > sm_count()) return 2;
  for (int s = kGemvMaxStages; s > 2; --s)
    if (gemv_resident<Xb>(p, s) >= ctas) return s;
  return 2;
}

}  // namespace

// Up to 32 rows: at 17-32 rows (verify of 4 sequences x 8 drafts) two row blocks per column block
// beat the tiled kernel by 1.3-2x (the second block reads the weights from L2); at 64 rows the four
// blocks stream them from DRAM again and the tiled kernel wins (docs/history/GPU_PERF_NOTES.md, session 5).
int gemv_max_rows() { return kGemvMaxRows; }

// Rows from which x goes through its bf16 copy (kGemvXbRows, 5).
int gemv_xb_rows() { return kGemvXbRows; }

uint64_t matmul_xb_reused() { return xb_reused().load(std::memory_order_relaxed); }
void matmul_count_xb_reused() { xb_reused().fetch_add(1, std::memory_order_relaxed); }

namespace {

template <bool Xb>
void run_gemv(const MatmulArgs* parts, int count, cudaStream_t stream, GemvForce force) {
  Params p = gemv_params<Gemv<2, Xb>>(parts, count, stream);  // (the Params do not depend on the stages)
  p.early_w = force.early_w < 0 ? kGemvEarlyW : force.early_w != 0;
  switch (gemv_stages_for<Xb>(p, force.stages)) {
    case 5: return launch_gemv<Gemv<5, Xb>>(p, stream);
    case 4: return launch_gemv<Gemv<4, Xb>>(p, stream);
    case 3: return launch_gemv<Gemv<3, Xb>>(p, stream);
    default: return launch_gemv<Gemv<2, Xb>>(p, stream);
  }
}

void run_gemv(const MatmulArgs* parts, int count, cudaStream_t stream, GemvForce force = {}) {
  if (parts[0].M >= gemv_xb_rows()) return run_gemv<true>(parts, count, stream, force);
  run_gemv<false>(parts, count, stream, force);
}

}  // namespace

void matmul_bf16_gemv(const MatmulArgs& a, cudaStream_t stream, GemvForce force) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;
  run_gemv(&a, 1, stream, force);
}

bool matmul_bf16_gemv_compatible(const MatmulArgs* parts, int count) {
  return parts_share_split(parts, count) && parts[0].M <= gemv_max_rows();
}

void matmul_bf16_gemv_multi(const MatmulArgs* parts, int count, cudaStream_t stream) {
  if (!matmul_bf16_gemv_compatible(parts, count))
    cuda_fail(cudaErrorInvalidValue, "matmul_bf16_gemv_multi: parts do not share one launch", __FILE__, __LINE__);
  run_gemv(parts, count, stream);
}

}  // namespace specserve::cuda::kernels
