#pragma once
// Device-only wrappers of the PTX the bf16 tensor-core matmul kernels use (matmul_tensor_core.cu, the
// tiled kernel, and the gemv, mid and wgmma kernels): cp.async, ldmatrix,
// mma.m16n8k16, the f32 -> bf16x2 rounding, the thread-block-cluster reduction of split-K partials,
// and the launch that sets the cluster size.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve::cuda::tc {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy, of which the first `bytes` come from global memory and the rest is zero. .ca
// keeps x in L1 (every warp of the CTA and the CTAs beside it read the same rows); .cg streams w.
__device__ __forceinline__ void cp_async_ca(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_cg(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
// One 16-byte piece of an operand (elements E) into shared memory at byte offset `off` (sbase: the
// shared-memory address of smem), `bytes` of it from src and zeros after: a whole piece goes through
// cp.async (.ca when kKeep: x, read again by the warps and CTAs beside; .cg: weights, streamed once);
// a piece cut by K or N is written element by element, so no instruction touches global memory past
// the operand (a cp.async with a short source size is still a 16-byte access to compute-sanitizer).
// The same bytes either way.
template <bool kKeep, class E>
__device__ __forceinline__ void copy_piece(uint32_t sbase, unsigned char* smem, int off, const E* src, int bytes);

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(addr)
               : "memory");
}

// d += a · b for one 16 x 8 x 16 step (d: c0 c1 c2 c3 of the C fragment).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent f32 -> one register of two bf16, round to nearest even; the lower k in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <bool kKeep, class E>
__device__ __forceinline__ void copy_piece(uint32_t sbase, unsigned char* smem, int off, const E* src, int bytes) {
  if (bytes == 16) {
    if constexpr (kKeep)
      cp_async_ca(sbase + off, src, 16);
    else
      cp_async_cg(sbase + off, src, 16);
  } else {
    constexpr int kSize = static_cast<int>(sizeof(E));
    for (int e = 0; e < 16 / kSize; ++e)
      *reinterpret_cast<E*>(smem + off + kSize * e) = kSize * e < bytes ? src[e] : E{0};
  }
}

// The split-K epilogue (S > 1): the S CTAs of one output tile form a cluster, CTA rank s having
// computed slice s. Each has written its partial tile (bm x bn f32, row-major) at `part` in its own
// shared memory; after the cluster barrier each CTA sums its share of the elements over the S
// partials in slice order (reduce_tile, sum_slices) through distributed shared memory, and a second
// barrier keeps every partial alive until all readers are done.
__device__ __forceinline__ void cluster_reduce(const Params& p, int64_t m0, int64_t n0, int bm, int bn,
                                               const float* part) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const float* parts[kMaxSlices];
#pragma unroll
  for (int s = 0; s < kMaxSlices; ++s)
    parts[s] = s < p.S ? cluster.map_shared_rank(part, static_cast<unsigned>(s)) : part;
  reduce_tile(p, m0, n0, bm, bn, static_cast<int>(cluster.block_rank()), static_cast<int>(threadIdx.x),
              static_cast<int>(blockDim.x), [&](int s, int e) {
                const float* q = parts[0];
#pragma unroll
                for (int i = 1; i < kMaxSlices; ++i) q = s == i ? parts[i] : q;  // no local-memory indexing
                return q[e];
              });
  cluster.sync();
}

// The weights of a multi-weight launch (matmul_multi's parts; bf16 weights) as make_multi_params takes
// them.
inline void weight_parts(const kernels::MatmulArgs* parts, int count, WeightPart* out) {
  for (int i = 0; i < count; ++i)
    out[i] = {static_cast<const uint16_t*>(parts[i].w), parts[i].ldw, parts[i].y, parts[i].ldy, parts[i].N};
}

// Whether `count` (1 .. Params::kMaxSegments) matmuls can be the segments of one launch: bf16 weights
// sharing x, M, K and the K split (k_split), each with columns. Host code; the launchers add their own
// limits (rows, alignment).
inline bool parts_share_split(const kernels::MatmulArgs* parts, int count) {
  if (count < 1 || count > Params::kMaxSegments) return false;
  const kernels::MatmulArgs& a0 = parts[0];
  if (a0.M <= 0 || a0.K <= 0) return false;
  const KSplit split = k_split(a0.N, a0.K, split_target_ctas());
  for (int i = 0; i < count; ++i) {
    const kernels::MatmulArgs& a = parts[i];
    const KSplit si = k_split(a.N, a.K, split_target_ctas());
    if (!a.w_bf16 || a.x != a0.x || a.ldx != a0.ldx || a.M != a0.M || a.K != a0.K || a.N <= 0 || si.S != split.S ||
        si.cps != split.cps)
      return false;
  }
  return true;
}

// Launches kernel<<<grid, threads, smem, stream>>>(p) as clusters of p.S consecutive CTAs (none when
// S == 1), with programmatic dependent launch (launch.cuh: the kernel calls pdl_wait() first).
template <class Kernel>
void launch_clusters(Kernel kernel, dim3 grid, int threads, int smem, cudaStream_t stream, const Params& p) {
  KernelLaunch l;
  l.func = reinterpret_cast<const void*>(kernel);
  l.grid = grid;
  l.block = dim3(static_cast<unsigned>(threads));
  l.smem = static_cast<size_t>(smem);
  l.cluster = p.S > 1 ? static_cast<unsigned>(p.S) : 1u;
  l.pdl = pdl_enabled();
  std::tuple<Params> values(p);
  enqueue_values(l, stream, values);
}

}  // namespace specserve::cuda::tc
