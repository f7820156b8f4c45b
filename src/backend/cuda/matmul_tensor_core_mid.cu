// The split-K tensor-core matmul for 17-64 rows (a verify of 2-4 sequences x 16 drafts, or of 4-16 x 4):
// y[M, N] = x[M, K] · w[N, K]ᵀ with the numerics contract heading matmul_tensor_core.cu (the K slices of
// k_split(N, K), one mma.m16n8k16 chain per slice in chunk order from zero, the slices summed left to
// right by sum_slices), so a row's bits are those the gemv kernel gives it alone.
//
// Why another kernel: at these rows the gemv kernel's CTAs cover 16 columns, and every CTA reads all of x
// (M * K * 2 bytes), so x's L2 traffic is M / 16 times the weights' (4x at 64 rows: 134 MB for the 8B q/o);
// the wgmma kernel's short split-K CTAs run at 2-2.3x the weight stream. Here a CTA covers 32 columns
// with 8 warps: with S = 8 slices a warp per slice (32 columns), with S = 4 two warps per slice (16
// columns each). Each warp streams its slice's weight tiles and x tiles (64 k a stage, 2 stages,
// cp.async) and keeps MT x (columns / 8) accumulators; the partials meet in shared memory and are summed
// in slice order. x comes from its bf16 copy (matmul_tensor_core_xb.cuh: xb_rows(M) = 16 MT rows, zero
// past M and K), so the A fragments are ldmatrix loads. tools/gpu/archive/rows64_matmul_probe.cu measured the
// design first (docs/history/GPU_PERF_NOTES.md, session 13).
//
// It runs when 17 <= M <= 64, S is 4 or 8, the weights take 16-byte loads (aligned, ldw % 8 == 0) and
// K % 8 == 0, and above 32 rows only when its waves are full enough (mid_fills_waves); otherwise the
// caller's other kernels do (backend/matmul_choice.h states the whole choice).
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

constexpr int kMidWarps = 8, kMidThreads = 32 * kMidWarps;
constexpr int kMidCols = 32;  // columns per CTA
static_assert(kMidCols == kMidColumns, "backend/matmul_choice.h counts the CTAs with this width");
constexpr int kMidKT = 64;     // k per stage (4 chunks)
constexpr int kMidPitch = 72;  // bf16 per shared row: 64 + 8, so ldmatrix's 8 rows fall in distinct bank groups
constexpr int kMidStages = 2;

// The CTA tile for make_params: up to 64 rows (one CTA row), kMidCols columns.
struct MidTile {
  static constexpr int kBM = 64, kBN = kMidCols;
};

template <int MT, int S>
struct Mid {
  static constexpr int kRows = 16 * MT;        // x rows per CTA (the copy's xb_rows(M))
  static constexpr int kWps = kMidWarps / S;   // warps per slice
  static constexpr int kCW = kMidCols / kWps;  // columns per warp
  static constexpr int kNT = kCW / 8;          // n8 tiles per warp
  static constexpr int kXBytes = kRows * kMidPitch * 2;
  static constexpr int kWBytes = kCW * kMidPitch * 2;
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kRingBytes = kMidWarps * kMidStages * kStageBytes;
  static constexpr int kPartBytes = S * kRows * kMidCols * 4;
  static constexpr int kSmem = kRingBytes > kPartBytes ? kRingBytes : kPartBytes;
  static_assert(kNT % 2 == 0, "B fragments come two n8 tiles per ldmatrix.x4");
  static_assert(kSmem <= 227 * 1024, "more shared memory than an sm_90 block may have");
};

template <int MT, int S>
__global__ void __launch_bounds__(kMidThreads, 1) matmul_mid_kernel(const Params launch) {
  using G = Mid<MT, S>;
  int64_t block = blockIdx.x;
  const Params p = segment_of(launch, block);
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int slice = warp / G::kWps, part_col0 = (warp % G::kWps) * G::kCW;
  const int64_t n0 = block * kMidCols + part_col0;
  const Slice sl = slice_of(p, slice);
  const int tiles = sl.begin < sl.end ? static_cast<int>(sl.tiles(kMidKT)) : 0;
  const uint32_t ring = smem_addr(smem) + static_cast<uint32_t>(warp * kMidStages * G::kStageBytes);

  // Tile t's x rows and weight rows into stage t % 2. x: whole pieces inside the copy (its pitch covers
  // a tile past the last chunk). w: a piece past N or K is zeros (its mma is skipped or its column unused).
  auto issue = [&](int t) {
    if (t < tiles) {
      const uint32_t st = ring + static_cast<uint32_t>((t % kMidStages) * G::kStageBytes);
      const int64_t k0 = sl.k0() + int64_t{t} * kMidKT;
      SS_TC_UNROLL
      for (int i = 0; i < G::kRows * 8 / 32; ++i) {
        const int e = i * 32 + lane, r = e >> 3, c = (e & 7) * 8;
        cp_async_ca(st + (r * kMidPitch + c) * 2, p.xb + r * p.ldxb + k0 + c, 16);
      }
      SS_TC_UNROLL
      for (int i = 0; i < G::kCW * 8 / 32; ++i) {
        const int e = i * 32 + lane, r = e >> 3, c = (e & 7) * 8;
        const uint32_t dst = st + G::kXBytes + (r * kMidPitch + c) * 2;
        if (n0 + r < p.N && k0 + c + 8 <= p.K)
          cp_async_cg(dst, p.w + (n0 + r) * p.ldw + k0 + c, 16);
        else
          asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(dst), "r"(0u) : "memory");
      }
    }
    cp_async_commit();
  };

  pdl_begin();  // x's copy is the previous kernel's output
  float acc[MT][G::kNT][4] = {};
  issue(0);
  for (int t = 0; t < tiles; ++t) {
    issue(t + 1);
    cp_async_wait<1>();  // tile t's group landed
    __syncwarp();
    const uint32_t st = ring + static_cast<uint32_t>((t % kMidStages) * G::kStageBytes);
    const int64_t chunk0 = sl.begin + int64_t{t} * (kMidKT / kMmaK);
    SS_TC_UNROLL
    for (int kk = 0; kk < kMidKT / kMmaK; ++kk) {
      if (chunk0 + kk >= sl.end) break;  // never an mma past the slice's last chunk
      uint32_t a[MT][4];
      SS_TC_UNROLL
      for (int i = 0; i < MT; ++i) {
        const RowCol rc = a_ldsm(lane);
        ldmatrix_x4(st + ((i * 16 + rc.row) * kMidPitch + kk * kMmaK + rc.col) * 2, a[i][0], a[i][1], a[i][2], a[i][3]);
      }
      SS_TC_UNROLL
      for (int j = 0; j < G::kNT; j += 2) {
        const RowCol rc = b_ldsm(lane, true);
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4(st + G::kXBytes + ((j * 8 + rc.row) * kMidPitch + kk * kMmaK + rc.col) * 2, b0, b1, b2, b3);
        SS_TC_UNROLL
        for (int i = 0; i < MT; ++i) {
          mma_bf16(acc[i][j], a[i], b0, b1);
          mma_bf16(acc[i][j + 1], a[i], b2, b3);
        }
      }
    }
    __syncwarp();  // every lane is done with this stage before tile t + 2 is issued into it
  }
  cp_async_wait_all();
  __syncthreads();
  // The partials, part[slice][row][CTA column], then each output summed in slice order.
  float* part = reinterpret_cast<float*>(smem);
  SS_TC_UNROLL
  for (int i = 0; i < MT; ++i) SS_TC_UNROLL
  for (int j = 0; j < G::kNT; ++j) SS_TC_UNROLL
  for (int e = 0; e < 4; ++e) {
    const RowCol rc = c_frag(lane, e >> 1);
    part[(slice * G::kRows + i * 16 + rc.row) * kMidCols + part_col0 + j * 8 + rc.col + (e & 1)] = acc[i][j][e];
  }
  __syncthreads();
  for (int o = static_cast<int>(threadIdx.x); o < G::kRows * kMidCols; o += kMidThreads) {
    const int r = o / kMidCols, c = o % kMidCols;
    const int64_t n = block * kMidCols + c;
    if (r >= p.M || n >= p.N) continue;
    p.y[r * p.ldy + n] = sum_slices(S, [&](int s) { return part[s * G::kRows * kMidCols + o]; });
  }
}

template <int MT, int S>
void launch_mid(const Params& p, cudaStream_t stream) {
  using G = Mid<MT, S>;
  static OncePerDevice configured;
  configured([] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_mid_kernel<MT, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, G::kSmem));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_mid_kernel<MT, S>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  if (p.nbn > INT_MAX)
    cuda_fail(cudaErrorInvalidConfiguration, "matmul: more CTAs than a grid holds", __FILE__, __LINE__);
  launch_pdl(matmul_mid_kernel<MT, S>, static_cast<unsigned>(p.nbn), kMidThreads, static_cast<size_t>(G::kSmem), stream,
             p);
}

template <int S>
void launch_mid_rows(const Params& p, cudaStream_t stream) {
  switch (ceil_div(p.M, kMmaK)) {
    case 2: return launch_mid<2, S>(p, stream);
    case 3: return launch_mid<3, S>(p, stream);
    default: return launch_mid<4, S>(p, stream);
  }
}

}  // namespace

bool matmul_bf16_mid(const MatmulArgs* parts, int count, cudaStream_t stream) {
  // (The row count first: every matmul of a step asks, and most have other row counts.)
  if (count < 1 || parts[0].M < 17 || parts[0].M > 64 || parts[0].K % 8 != 0) return false;
  if (!parts_share_split(parts, count)) return false;
  const MatmulArgs& a0 = parts[0];
  const int S = k_split(a0.N, a0.K, split_target_ctas()).S;
  if (S != 4 && S != 8) return false;
  WeightPart wp[Params::kMaxSegments];
  weight_parts(parts, count, wp);
  Params p = make_multi_params(wp, count, [&](const WeightPart& w) {
    return make_params<MidTile>(a0.x, a0.ldx, w.w, w.ldw, w.y, w.ldy, a0.M, w.N, a0.K);
  });
  // Every weight takes 16-byte loads (make_params' vec_w: aligned, ldw % 8 == 0).
  for (int i = 0; i < p.segments; ++i)
    if (!p.seg[i].vec_w) return false;
  if (!p.vec_w) return false;
  // Above 32 rows only when its waves are full enough (mid_fills_waves: at 64 rows a short second wave
  // made the 27B's o and down projections slower than the wgmma kernel, 37.3 -> 41.9 and 91.8 -> 118 µs,
  // while the 8B's q/k/v and gate/up gained: 8B verify of 64 rows 12.13 -> 11.44 ms).
  if (!mid_fills_waves(a0.M, p.nbn, sm_count())) return false;
  // x's bf16 copy: the producer's (XbOut, in the gemv kernel's layout, whose pitch covers this kernel's
  // tiles too) or a new one.
  const int64_t pitch = xb_pitch(a0.K, kMidKT);
  if (a0.xb != nullptr && a0.ldxb >= pitch) {
    p.xb = a0.xb;
    p.ldxb = a0.ldxb;
    matmul_count_xb_reused();
  } else {
    p.ldxb = pitch;
    p.xb = matmul_x_to_bf16(a0.x, a0.ldx, a0.M, a0.K, pitch, stream);
  }
  if (S == 8)
    launch_mid_rows<8>(p, stream);
  else
    launch_mid_rows<4>(p, stream);
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace specserve::cuda::kernels
