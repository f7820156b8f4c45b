// The streaming matmul for block-scaled fp8 weights and few rows (decode and verify, 1 to gemv_max_rows()
// rows: MatmulKernel::Fp8Gemv): y[M, N] = x[M, K] · dequant(w)[N, K]ᵀ, the weights read once as e4m3 (half
// the bytes of bf16) with their f32 block scales.
//
// It is the bf16 gemv kernel (matmul_tensor_core_gemv.cuh / .cu) with another weight path: the same
// CTA shape (gemv_shape: warps split the K slices of 16-column groups), the same K split (k_split of N and
// K), the same 128-k tiles, A fragments, mma chains and slice sum (gemv_reduce). Each warp streams its
// weight tiles as e4m3 codes (16 rows x 128 codes, 2 KB) through a ring of kStages stages with cp.async;
// when a tile is due, each lane dequantises the codes it copied (matmul_fp8_math.cuh) into the warp's one
// bf16 tile in shared memory (the gemv kernel's [16][kSB] layout), and the warp's ldmatrix and mma run on
// it exactly as on a bf16 weight tile. So every mma sees the operands the bf16 gemv kernel sees for the
// bf16 dequantisation of the weight, in the same order: y has its bits (the numerics contract of
// matmul_tensor_core.cu, and backend/ops.h for fp8), and a row's bits do not depend on M.
//
// A 16-code piece never straddles a scale block: a tile's k0 is a multiple of 16 (chunk boundaries) and its
// 16 rows n0w .. n0w + 15 lie in one 128-row block (n0w is a multiple of 16).
//
// Not tuned (to be measured on the device): the stage counts below, the early weight loads the bf16
// kernel issues before pdl_wait, several weights per launch (q/k/v run as three launches), and the
// dequantisation straight into registers instead of through the shared bf16 tile.
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_math.cuh"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_rows.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

// A launch: the gemv Params (x, y, shape, split; w unused) and the fp8 weight.
struct Fp8Params {
  Params p;
  const uint8_t* q = nullptr;  // e4m3 codes, rows ldq bytes apart
  int64_t ldq = 0;
  bool vec_q = false;  // 16-byte cp.async of the codes (16-byte aligned, ldq % 16 == 0)
  const float* scales = nullptr;
  int64_t scale_ld = 0;
};

// Per warp: kStages stages of [codes: 16 rows x kSQ bytes][x: as the gemv kernel's], then one bf16 weight
// tile [16 rows x kSB] that ldmatrix reads. After the main loop the bytes hold the slices' partial tiles
// (GemvLayout's part_off).
template <class G>
struct Fp8Layout {
  static constexpr int kSQ = G::kKT + 16;  // code pitch in bytes (16-byte pieces)
  int x_rows = 0;
  static constexpr int q_bytes() { return 16 * kSQ; }
  constexpr int x_bytes() const { return G::kXb ? 16 * G::kSB * 2 : x_rows * G::kSA * 4; }
  constexpr int stage_bytes() const { return q_bytes() + x_bytes(); }
  static constexpr int b_bytes() { return G::kWarpN * G::kSB * 2; }
  constexpr int warp_bytes() const { return G::kStages * stage_bytes() + b_bytes(); }
  constexpr int q_off(int warp, int stage, int r, int k) const {
    return warp * warp_bytes() + stage * stage_bytes() + r * kSQ + k;
  }
  constexpr int x_off(int warp, int stage, int r, int k) const {
    return warp * warp_bytes() + stage * stage_bytes() + q_bytes() +
           (G::kXb ? (r * G::kSB + k) * 2 : (r * G::kSA + k) * 4);
  }
  constexpr int b_off(int warp, int n, int k) const {
    return warp * warp_bytes() + G::kStages * stage_bytes() + (n * G::kSB + k) * 2;
  }
  constexpr int smem_bytes(int S) const {
    const int stages = G::kWarps * warp_bytes();
    const int parts = S > 1 ? GemvLayout<G>::part_off(S, gemv_shape(S).groups, 0, 0, 0) : 0;
    return stages > parts ? stages : parts;
  }
};

// Piece j (0..3) of this lane in a tile: 16 codes at row r, k offset c (of 128).
__device__ __forceinline__ void piece_of(int lane, int j, int& r, int& c) {
  const int i = lane + 32 * j;
  r = i / 8;
  c = (i % 8) * 16;
}

template <class G>
__global__ void __launch_bounds__(G::kThreads, 2) matmul_fp8_gemv_kernel(const Fp8Params f) {
  pdl_begin();
  const Params& p = f.p;
  extern __shared__ __align__(128) unsigned char smem[];
  const Fp8Layout<G> lay{p.a_rows};
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = smem_addr(smem);
  constexpr int kChunks = G::kKT / kMmaK;

  const GemvShape shape = gemv_shape(p.S);
  const GemvWork work = gemv_work(p, warp);
  const int64_t block = blockIdx.x / p.nbm;
  const int64_t n0 = block * shape.columns(), n0w = n0 + work.group * G::kWarpN;
  const int64_t m0 = int64_t{blockIdx.x % p.nbm} * G::kBM;
  const int valid_rows = p.M - m0 < G::kBM ? static_cast<int>(p.M - m0) : G::kBM;
  const int tiles = static_cast<int>(work.tiles(G::kKT));

  auto st_f32 = [&](int off, float v) { *reinterpret_cast<float*>(smem + off) = v; };
  auto cp16_x = [&](int off, const float* src, int bytes) { copy_piece<true>(sbase, smem, off, src, bytes); };
  auto cvt2 = [&](int off) {
    const float2 v = *reinterpret_cast<const float2*>(smem + off);
    return pack_bf16x2(v.x, v.y);
  };

  // Tile t of the warp's run (k from work.begin * 16 + t * 128): its codes (zero past N and K) and x rows.
  auto issue = [&](int t) {
    const int stage = t % G::kStages;
    const int64_t k0 = work.begin * kMmaK + int64_t{t} * G::kKT;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r, c;
      piece_of(lane, j, r, c);
      const int64_t n = n0w + r, k = k0 + c;
      const int bytes = n >= p.N || k >= p.K ? 0 : p.K - k >= 16 ? 16 : static_cast<int>(p.K - k);
      const int off = lay.q_off(warp, stage, r, c);
      if (bytes == 16 && f.vec_q) {
        cp_async_cg(sbase + off, f.q + n * f.ldq + k, 16);
      } else {
        const uint8_t* src = f.q + (bytes ? n * f.ldq + k : 0);
        for (int e = 0; e < 16; ++e) smem[off + e] = e < bytes ? src[e] : uint8_t{0};
      }
    }
    if constexpr (G::kXb) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int r = lane / 16 + 2 * i, c = (lane % 16) * 8;
        cp_async_ca(sbase + lay.x_off(warp, stage, r, c), p.xb + (m0 + r) * p.ldxb + k0 + c, 16);
      }
    } else {
      load_x_rows(
          p, m0, k0, G::kKT, lane, 32, [&](int r, int c) { return lay.x_off(warp, stage, r, c); }, cp16_x, st_f32);
    }
  };

  float acc[G::kMaxSlicesPerWarp][2][4] = {};
#pragma unroll
  for (int t = 0; t < G::kStages - 1; ++t) {
    if (t < tiles) issue(t);
    cp_async_commit();
  }
  const RowCol b_lane = b_ldsm(lane, true);
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<G::kStages - 2>();  // this lane's copies of tile kt landed
    __syncwarp();                     // the warp's have, and every lane is done with tile kt - 1 (bf16 tile too)
    if (kt + G::kStages - 1 < tiles) issue(kt + G::kStages - 1);
    cp_async_commit();

    const int stage = kt % G::kStages;
    const int64_t k0 = work.begin * kMmaK + int64_t{kt} * G::kKT;
    // Each lane dequantises the pieces it copied into the warp's bf16 tile.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r, c;
      piece_of(lane, j, r, c);
      const int64_t n = n0w + r, k = k0 + c;
      const float scale = n < p.N && k < p.K ? f.scales[n / fp8::kBlock * f.scale_ld + k / fp8::kBlock] : 0.0f;
      const uint4 codes = *reinterpret_cast<const uint4*>(smem + lay.q_off(warp, stage, r, c));
      uint4 lo, hi;
      fp8::dequant16_bf16(codes, scale, lo, hi);
      *reinterpret_cast<uint4*>(smem + lay.b_off(warp, r, c)) = lo;
      *reinterpret_cast<uint4*>(smem + lay.b_off(warp, r, c + 8)) = hi;
    }
    __syncwarp();  // the bf16 tile is whole

    const int64_t chunk0 = work.begin + int64_t{kt} * kChunks;
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
      const int64_t ch = chunk0 + kk;
      if (ch >= work.end) break;  // never an mma past the last chunk of the warp's last slice
      uint32_t b0, b1, b2, b3, a[4];
      ldmatrix_x4(sbase + lay.b_off(warp, b_lane.row, b_lane.col + kk * kMmaK), b0, b1, b2, b3);
      if constexpr (G::kXb) {
        const RowCol al = a_ldsm(lane);
        ldmatrix_x4(sbase + lay.x_off(warp, stage, al.row, al.col + kk * kMmaK), a[0], a[1], a[2], a[3]);
      } else {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const RowCol af = a_frag(lane, r);
          a[r] = af.row < valid_rows ? cvt2(lay.x_off(warp, stage, af.row, af.col + kk * kMmaK)) : 0u;
        }
      }
      if (ch < work.split) {  // the chunk's slice picks its chain
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

constexpr int kBlockSmemMax = 227 * 1024;

template <class G>
void launch(const Fp8Params& f, cudaStream_t stream) {
  static const bool configured = [] {
    CUDA_CHECK(
        cudaFuncSetAttribute(matmul_fp8_gemv_kernel<G>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmemMax));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_fp8_gemv_kernel<G>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  if (f.p.nbn * f.p.nbm > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  const int smem = Fp8Layout<G>{f.p.a_rows}.smem_bytes(f.p.S);
  if (smem > kBlockSmemMax) cuda_fail(cudaErrorInvalidConfiguration, "fp8 gemv: shared memory", __FILE__, __LINE__);
  launch_pdl(matmul_fp8_gemv_kernel<G>, static_cast<unsigned>(f.p.nbn * f.p.nbm), G::kThreads,
             static_cast<size_t>(smem), stream, f);
  CUDA_CHECK_LAUNCH();
}

// Stages per warp (any count has the same bits): f32 x (1-4 rows) 4 stages, 63 KB a CTA at one row; from 5
// rows x's bf16 copy, 3 stages, 97 KB a CTA. Each warp keeps kStages - 1 tiles of 2 KB of codes in flight.
using Fp8GemvF32X = Gemv<4, false>;
using Fp8GemvXb = Gemv<3, true>;
static_assert(Fp8GemvF32X::kKT == 128 && Fp8GemvXb::kKT == 128, "tiles of 128 k: pieces never straddle a block");

template <class G>
void run(const MatmulArgs& a, cudaStream_t stream) {
  Fp8Params f;
  f.p = make_gemv_params<G>(a.x, a.ldx, nullptr, a.K, a.y, a.ldy, a.M, a.N, a.K);
  f.q = static_cast<const uint8_t*>(a.w);
  f.ldq = a.ldw;
  f.vec_q = (reinterpret_cast<uintptr_t>(a.w) & 15u) == 0 && (a.N == 1 || a.ldw % 16 == 0);
  f.scales = a.w_scales;
  f.scale_ld = a.scale_ld;
  if constexpr (G::kXb) {
    f.p.ldxb = xb_pitch(a.K, G::kKT);
    if (a.xb != nullptr && a.ldxb == f.p.ldxb) {
      f.p.xb = a.xb;  // x's producer wrote the copy (kernels.h: XbOut)
      matmul_count_xb_reused();
    } else {
      f.p.xb = matmul_x_to_bf16(a.x, a.ldx, a.M, a.K, f.p.ldxb, stream);
    }
  }
  launch<G>(f, stream);
}

}  // namespace

void matmul_fp8_gemv(const MatmulArgs& a, cudaStream_t stream) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;
  if (a.w_scales == nullptr || a.M > gemv_max_rows())
    cuda_fail(cudaErrorInvalidValue, "matmul_fp8_gemv: not an fp8 weight of at most 32 rows", __FILE__, __LINE__);
  if (a.M >= gemv_xb_rows()) return run<Fp8GemvXb>(a, stream);
  run<Fp8GemvF32X>(a, stream);
}

}  // namespace specserve::cuda::kernels
