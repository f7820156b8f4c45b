// RMSNorm flavours (backend/cpu/norm.cpp). A group of d elements is normed by one block of norm_threads(d)
// threads with the fixed order of norm_math.cuh: thread t accumulates elements t, t + blockDim, ... with
// fmaf, then warp_sum, then the warps' partials in warp order. rms_norm and add_rms_norm can also write
// their output's bf16 copy for the gemv kernel (XbOut, xb_out.cuh).
//
// Groups up to kNormHeld * blockDim.x wide take the held-row kernels below: the bits of the one-block-a-row
// kernels (norm_reference.cu, which still take wider groups), laid out for bandwidth at prefill sizes.
// The reference add_rms_norm kernel at [2048, 5120] ran at about half its byte floor: 64 registers left
// one block of 1024 threads a multiprocessor, a block a row, each block loading the weights, then its
// row, then reading its output back from L2 for the bf16 copy after a barrier, one phase after another.
// Here:
//  - the block size B = norm_threads(d) and S = ceil(d / B) register slots a thread are template
//    parameters (slot offsets are immediates, no dead slots), slot j of thread t holding element
//    t + j * B, the order in which the sum of squares walks it;
//  - the grid is the blocks the device holds at once (the occupancy API), each walking groups
//    g, g + gridDim.x, ...: the norm weights are loaded once a block (before the wait for the previous
//    kernel, as before), and the loads of the next one or two groups are in flight while the block
//    reduces, normalises and stores this one (kAhead; 1536 threads a multiprocessor at <= 40 registers,
//    or one block of 1024 at <= 64: ptxas -v shows no spills beyond a word or two at the shapes used);
//  - the bf16 copy is packed from the registers (the odd neighbour's element by a shuffle), not read
//    back from the written output after a barrier.
// Only the grid depends on the number of groups; the block size, the slots and every addition depend on
// d alone, so a group's bits do not depend on how many groups a launch has (test_cuda_norm_rows.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/norm_reference.h"
#include "backend/cuda/xb_out.cuh"
#include "core/error.h"

namespace specserve::cuda::kernels {

namespace {

// Slot j of thread t of a block of B threads: element t + j * B of the group (B a template: the slots'
// offsets are immediates, not registers).
template <int B>
__device__ __forceinline__ int slot_index(int j) {
  return static_cast<int>(threadIdx.x) + j * B;
}

template <int B, int S>
__device__ __forceinline__ void load_slots(const float* p, int d, float (&r)[S]) {
#pragma unroll
  for (int j = 0; j < S; ++j) r[j] = slot_index<B>(j) < d ? p[slot_index<B>(j)] : 0.0f;
}

// This thread's partial sum of squares, in inv_rms's order.
template <int B, int S>
__device__ __forceinline__ float slots_sum_sq(const float (&v)[S], int d) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < S; ++j)
    if (slot_index<B>(j) < d) s = fmaf(v[j], v[j], s);
  return s;
}

// Row g of the bf16 copy from the held outputs o (+0 in the slots past d): the even lane of each pair
// packs its element and its odd neighbour's (a shuffle: the same slot of lane + 1 holds element + 1, B
// being a multiple of 32), the registers past S * B up to the pitch are +0; then the padding rows
// groups + g, 2 groups + g, ... (xb_write's +0). The registers xb_write would write.
template <int B, int S>
__device__ __forceinline__ void xb_write_slots(const XbOut& xb, int64_t g, int64_t groups, const float (&o)[S]) {
  uint32_t* out = xb.regs + g * (xb.pitch / 2);
  const bool even = (threadIdx.x & 1) == 0;
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const float hi = __shfl_down_sync(0xffffffffu, o[j], 1);
    if (even && slot_index<B>(j) < xb.pitch) out[slot_index<B>(j) / 2] = tc::pack_bf16x2(o[j], hi);
  }
  for (int64_t k = int64_t{S} * B + 2 * threadIdx.x; k < xb.pitch; k += 2 * B) out[k / 2] = tc::pack_bf16x2(0.0f, 0.0f);
  for (int64_t m = groups + g; m < xb.rows; m += groups) xb_write(xb, m, nullptr, 0, 0, xb.pitch, threadIdx.x, B);
}

// Blocks of B threads a multiprocessor should hold: 1536 threads (<= 40 registers), or one block of 1024
// (<= 64).
template <int B>
constexpr int kMinBlocks = B == 1024       ? 1
                           : 1536 / B < 32 ? 1536 / B
                                           : 32;
// Groups a block keeps in flight beyond the one it finishes: two where the registers hold them without
// spilling (ptxas -v), else one.
template <int B, int S, bool kAdd>
constexpr int kAhead = !kAdd || (B == 1024 && S <= 5) ? 2 : 1;

// rms_norm (kAdd false: x is only read, y may alias it) and add_rms_norm (kAdd: x += y, then out =
// rms_norm(x); the thread that adds an element squares it). x is written only with kAdd. With more
// groups than blocks, a block keeps the loads of its next kAhead groups in flight while it reduces and
// stores this one (other rows: no aliasing).
template <int B, int S, bool kAdd>
__global__ void __launch_bounds__(B, kMinBlocks<B>)
    norm_held_kernel(float* x, const float* y, const float* w, float* out, int64_t groups, int d, int kind, float eps,
                     XbOut xb) {
  constexpr bool kTwo = kAhead<B, S, kAdd> == 2;
  __shared__ float shared[32];
  // v, u: this group's x and y; v1, u1: the next group's (with kTwo).
  float wv[S], v[S], u[S], v1[kTwo ? S : 1], u1[kTwo && kAdd ? S : 1];
  load_slots<B>(w, d, wv);
  pdl_begin();
  int64_t g = blockIdx.x;
  if (g < groups) {
    load_slots<B>(x + g * d, d, v);
    if constexpr (kAdd) load_slots<B>(y + g * d, d, u);
  }
  if constexpr (kTwo) {
    if (g + gridDim.x < groups) {
      load_slots<B>(x + (g + gridDim.x) * d, d, v1);
      if constexpr (kAdd) load_slots<B>(y + (g + gridDim.x) * d, d, u1);
    }
  }
  for (; g < groups; g += gridDim.x) {
    if constexpr (kAdd) {
      float* xr = x + g * d;
#pragma unroll
      for (int j = 0; j < S; ++j) {
        v[j] = v[j] + u[j];
        if (slot_index<B>(j) < d) xr[slot_index<B>(j)] = v[j];
      }
    }
    // The last group in flight: g + 2 gridDim.x (kTwo) or g + gridDim.x; y's into u, free once added.
    const int64_t last = g + int64_t{kAhead<B, S, kAdd>} * gridDim.x;
    float vl[S];
    if (last < groups) {
      load_slots<B>(x + last * d, d, vl);
      if constexpr (kAdd) load_slots<B>(y + last * d, d, u);
    }
    const float r = inv_rms_of(slots_sum_sq<B>(v, d), d, eps, shared);
    float* orow = out + g * d;
#pragma unroll
    for (int j = 0; j < S; ++j) {
      if (slot_index<B>(j) < d) {
        v[j] = normed(v[j], wv[j], kind, r);
        orow[slot_index<B>(j)] = v[j];
      } else {
        v[j] = 0.0f;
      }
    }
    if (xb.regs != nullptr) xb_write_slots<B>(xb, g, groups, v);
#pragma unroll
    for (int j = 0; j < S; ++j) {
      if constexpr (kTwo) {
        v[j] = v1[j];
        v1[j] = vl[j];
        if constexpr (kAdd) {
          const float t = u1[j];
          u1[j] = u[j];
          u[j] = t;
        }
      } else {
        v[j] = vl[j];
      }
    }
  }
}

// Blocks of B threads a multiprocessor should hold for the gated norm: 1536 threads (<= 40 registers:
// its two groups in flight and the weights), one block of 1024.
template <int B>
constexpr int kGatedMinBlocks = B == 1024       ? 1
                                : 1536 / B < 32 ? 1536 / B
                                                : 32;

// y = (w * (x * r)) * silu(z), as rms_norm_gated_kernel (norm_reference.cu) computes it. The groups are
// small (the DeltaNet heads: 128 wide, 64 threads): a block keeps its next two groups' loads in flight.
template <int B, int S>
__global__ void __launch_bounds__(B, kGatedMinBlocks<B>)
    rms_norm_gated_held_kernel(const float* x, const float* z, const float* w, float* y, int64_t groups, int d,
                               float eps) {
  __shared__ float shared[32];
  float wv[S], v[S], zv[S], v1[S], z1[S];
  load_slots<B>(w, d, wv);
  pdl_begin();
  int64_t g = blockIdx.x;
  if (g < groups) {
    load_slots<B>(x + g * d, d, v);
    load_slots<B>(z + g * d, d, zv);
  }
  if (g + gridDim.x < groups) {
    load_slots<B>(x + (g + gridDim.x) * d, d, v1);
    load_slots<B>(z + (g + gridDim.x) * d, d, z1);
  }
  for (; g < groups; g += gridDim.x) {
    // The group after next (other rows: no aliasing with y, which may be x).
    const int64_t after = g + 2 * int64_t{gridDim.x};
    float v2[S], z2[S];
    if (after < groups) {
      load_slots<B>(x + after * d, d, v2);
      load_slots<B>(z + after * d, d, z2);
    }
    const float r = inv_rms_of(slots_sum_sq<B>(v, d), d, eps, shared);
    float* yr = y + g * d;
#pragma unroll
    for (int j = 0; j < S; ++j)
      if (slot_index<B>(j) < d) yr[slot_index<B>(j)] = (wv[j] * (v[j] * r)) * d_silu(zv[j]);
#pragma unroll
    for (int j = 0; j < S; ++j) {
      v[j] = v1[j];
      zv[j] = z1[j];
      v1[j] = v2[j];
      z1[j] = z2[j];
    }
  }
}

// Slots a thread for a held group of d (0: too wide, the reference kernels).
int held_slots(int64_t d) {
  const int64_t threads = norm_threads(d), s = (d + threads - 1) / threads;
  return s <= kNormHeld ? static_cast<int>(s) : 0;
}

// The slot counts a block of B = norm_threads(d) threads can have for a held d (norm_threads' ranges:
// d <= 64 on 32 threads, (64, 128] on 64, (128, 512] on 128, (512, 1024] on 256, (1024, 2048] on 512,
// above on 1024): only these are instantiated.
template <int B>
constexpr int kSlotsLo = B == 32    ? 1
                         : B <= 128 ? 2
                                    : 3;
template <int B>
constexpr int kSlotsHi = B <= 64    ? 2
                         : B <= 512 ? 4
                                    : kNormHeld;

template <int B, int S, class F>
void call_shape(F& f) {
  if constexpr (S >= kSlotsLo<B> && S <= kSlotsHi<B>)
    f(std::integral_constant<int, B>{}, std::integral_constant<int, S>{});
  else
    throw Error("norm: no held kernel for " + std::to_string(B) + " threads and " + std::to_string(S) + " slots");
}

template <int B, class F>
void with_slots(int s, F& f) {
  static_assert(kNormHeld == 8, "one case a slot count");
  switch (s) {
    case 1: return call_shape<B, 1>(f);
    case 2: return call_shape<B, 2>(f);
    case 3: return call_shape<B, 3>(f);
    case 4: return call_shape<B, 4>(f);
    case 5: return call_shape<B, 5>(f);
    case 6: return call_shape<B, 6>(f);
    case 7: return call_shape<B, 7>(f);
    default: return call_shape<B, 8>(f);
  }
}

// Calls f(integral_constant B, integral_constant S) for a held d: B = norm_threads(d), S its slots.
template <class F>
void with_shape(int64_t d, F&& f) {
  const int s = held_slots(d);
  switch (norm_threads(d)) {
    case 32: return with_slots<32>(s, f);
    case 64: return with_slots<64>(s, f);
    case 128: return with_slots<128>(s, f);
    case 256: return with_slots<256>(s, f);
    case 512: return with_slots<512>(s, f);
    default: return with_slots<1024>(s, f);
  }
}

// Blocks of Kernel that the device holds at once (the occupancy API, once per kernel), at most `groups`
// and 65535.
template <auto Kernel, int B>
unsigned resident_grid(int64_t groups) {
  static const int per_sm = [] {
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, B, 0));
    return std::max(n, 1);
  }();
  return static_cast<unsigned>(std::min<int64_t>({groups, int64_t{per_sm} * sm_count(), 65535}));
}

template <bool kAdd>
void launch_held(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind, float eps,
                 cudaStream_t stream, const XbOut& xb) {
  with_shape(d, [&](auto threads, auto slots) {
    constexpr int kB = decltype(threads)::value, kS = decltype(slots)::value;
    constexpr auto kernel = norm_held_kernel<kB, kS, kAdd>;
    launch_pdl(kernel, resident_grid<kernel, kB>(groups), kB, 0, stream, x, y, w, out, groups, static_cast<int>(d),
               kind, eps, xb);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind, float eps,
              cudaStream_t stream, const XbOut& xb) {
  if (groups == 0) return;
  const int s = held_slots(d);
  if (s == 0) return rms_norm_reference(x, w, y, groups, d, kind, eps, stream, xb);
  // The kernel writes x only when it adds (kAdd): here it reads it.
  launch_held<false>(const_cast<float*>(x), nullptr, w, y, groups, d, kind, eps, stream, xb);
}

void add_rms_norm(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind, float eps,
                  cudaStream_t stream, const XbOut& xb) {
  if (groups == 0) return;
  const int s = held_slots(d);
  if (s == 0) return add_rms_norm_reference(x, y, w, out, groups, d, kind, eps, stream, xb);
  launch_held<true>(x, y, w, out, groups, d, kind, eps, stream, xb);
}

void rms_norm_gated(const float* x, const float* z, const float* w, float* y, int64_t groups, int64_t d, float eps,
                    cudaStream_t stream) {
  if (groups == 0) return;
  const int s = held_slots(d);
  if (s == 0) return rms_norm_gated_reference(x, z, w, y, groups, d, eps, stream);
  with_shape(d, [&](auto threads, auto slots) {
    constexpr int kB = decltype(threads)::value, kS = decltype(slots)::value;
    constexpr auto kernel = rms_norm_gated_held_kernel<kB, kS>;
    launch_pdl(kernel, resident_grid<kernel, kB>(groups), kB, 0, stream, x, z, w, y, groups, static_cast<int>(d), eps);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
