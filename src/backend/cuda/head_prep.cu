// The attention block's per-head preparation in one launch (Ops::qk_norm_rope_kv_store and its _rows
// form, whose queries are other rows than its keys): one block per query head of each q row, then one per
// KV head of each KV row. The block norms its head exactly as
// rms_norm_kernel would (norm_math.cuh: the same threads per group, the same order), rotates it exactly
// as rope_kernel would (rope_math.cuh) in shared memory, writes it back, and a KV head's block also
// stores the head's key and value into the row's cache slot as kv_store_kernel would. So the bits are
// those of rms_norm; rope; kv_store, in a fifth of the launches (with the same rounding into a bf16 cache:
// kv_narrow). A query head is read from q_in's head (Qwen3.5's queries inside its [query | gate] heads,
// or q itself) and written to q's; both reads of it come before the write, so q_in may be q.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/rope_math.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

template <class KV>
__global__ void qk_norm_rope_kv_store_kernel(HeadPrepArgs a, const KvRow* rows, void* const* ptrs, Geo geo) {
  pdl_begin();
  extern __shared__ float s_head[];  // [head_dim]: the normed head, then rotated
  __shared__ float shared[32];
  // Blocks [0, q_rows * num_heads) are q's heads, row by row; then k's, row by row.
  const int64_t q_blocks = a.q_rows * a.num_heads;
  const bool is_k = blockIdx.x >= q_blocks;
  const int64_t b = is_k ? blockIdx.x - q_blocks : blockIdx.x;
  const int per_row = is_k ? geo.num_kv_heads : a.num_heads;
  const int64_t r = b / per_row;
  const int h = static_cast<int>(b % per_row);
  const int hd = geo.head_dim;
  float* x = is_k ? a.k + r * a.ldk + int64_t{h} * hd : a.q + r * a.ldq + int64_t{h} * hd;
  const float* src = is_k ? x : a.q_in + r * a.ldq_in + h * a.q_head_stride;
  const int32_t position = is_k || a.q_pos == nullptr ? rows[r].position : a.q_pos[r];

  write_normed(src, is_k ? a.k_norm : a.q_norm, s_head, hd, a.kind, inv_rms(src, hd, a.eps, shared));
  __syncthreads();
  const int half = a.rot_dim / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_pair(s_head, i, half, a.inv_freq[i], position);
  __syncthreads();
  for (int i = threadIdx.x; i < hd; i += blockDim.x) x[i] = s_head[i];
  if (!is_k) return;
  const KvRow row = rows[r];
  KV* block = static_cast<KV*>(kv_block_of(row, ptrs));
  const int slot = row.position % kBlockSize;
  KV* k_slot = block + geo.offset(0, h, slot);
  KV* v_slot = block + geo.offset(1, h, slot);
  const float* v = a.v + r * a.ldv + int64_t{h} * hd;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    k_slot[i] = kv_narrow<KV>(s_head[i]);
    v_slot[i] = kv_narrow<KV>(v[i]);
  }
}

// The same arithmetic with one block of 256 threads per row, for calls of many rows whose queries are
// the KV rows (a prefill chunk, a verify): the block is kGroups groups of T = norm_threads(HD) threads, and
// group g takes heads g, g + kGroups, .. of the row (q's, then k's), each exactly as the kernel above
// would with a block of T threads: thread t of the group accumulates elements t, t + T, .. with fmaf, then
// warp_sum, then the group's warps' partials in warp order (block_sum's order), the same normed() and
// rope_rotate(). The row's cos and sin (rope_cos_sin of the same angle) are computed once for all its heads
// instead of once per head: the per-head kernel spent most of its ~100 µs on 2,048-row prefill chunks of
// the 8B (40 heads a row) recomputing them and on 80k tiny blocks (session 18's trace).
// A call of few rows (a verify of 64-256) cuts each row's heads into gridDim.y runs of whole groups, one
// block each (by_row_runs: about four blocks a multiprocessor), each computing the row's cos and sin for
// itself: one block a row ran its 40 heads in 10 dependent rounds, 17.7 µs a layer at 128 rows on the
// 8B (the verify's kernel trace, session 26). Which block takes a head changes no bit.
template <class KV, int HD>
__global__ void __launch_bounds__(256)
    qk_norm_rope_kv_store_by_row_kernel(HeadPrepArgs a, const KvRow* rows, void* const* ptrs, Geo geo) {
  constexpr int T = HD <= 64 ? 32 : HD <= 128 ? 64 : 128;  // norm_threads(HD)
  constexpr int kGroups = 256 / T, kWarps = T / 32;
  __shared__ float s_cos[HD / 2], s_sin[HD / 2];
  __shared__ float s_head[kGroups][HD];
  __shared__ float s_part[kGroups][kWarps];
  pdl_begin();
  const int64_t r = blockIdx.x;
  const KvRow row = rows[r];
  const int half = a.rot_dim / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cos_sin(a.inv_freq[i], row.position, s_cos[i], s_sin[i]);
  const int g = static_cast<int>(threadIdx.x) / T, t = static_cast<int>(threadIdx.x) % T;
  const int warp = t >> 5, lane = t & 31;
  const int heads = a.num_heads + geo.num_kv_heads;
  // This block's heads: runs of whole groups, run blockIdx.y of gridDim.y.
  const int rounds = (heads + kGroups - 1) / kGroups, per = (rounds + gridDim.y - 1) / gridDim.y;
  const int first = static_cast<int>(blockIdx.y) * per * kGroups;
  const int last = min(heads, first + per * kGroups);
  float* head = s_head[g];
  for (int h0 = first; h0 < last; h0 += kGroups) {
    const int h = h0 + g;
    const bool live = h < last, is_k = h >= a.num_heads;
    const int kh = h - a.num_heads;
    float* x = !live ? nullptr : is_k ? a.k + r * a.ldk + int64_t{kh} * HD : a.q + r * a.ldq + int64_t{h} * HD;
    const float* src = !live || is_k ? x : a.q_in + r * a.ldq_in + h * a.q_head_stride;
    float sum = 0.0f;
    if (live)
      for (int i = t; i < HD; i += T) sum = fmaf(src[i], src[i], sum);
    sum = warp_sum(sum);
    if (lane == 0) s_part[g][warp] = sum;
    __syncthreads();  // the partials (and, at h0 = 0, the row's cos and sin)
    if (live) {
      float total = 0.0f;
      for (int w = 0; w < kWarps; ++w) total += s_part[g][w];
      const float inv = 1.0f / sqrtf(total / static_cast<float>(HD) + a.eps);
      const float* w = is_k ? a.k_norm : a.q_norm;
      for (int i = t; i < HD; i += T) head[i] = normed(src[i], w[i], a.kind, inv);
    }
    __syncthreads();
    if (live)
      for (int i = t; i < half; i += T) rope_rotate(head, i, half, s_cos[i], s_sin[i]);
    __syncthreads();
    if (live) {
      for (int i = t; i < HD; i += T) x[i] = head[i];
      if (is_k) {
        KV* block = static_cast<KV*>(kv_block_of(row, ptrs));
        const int slot = row.position % kBlockSize;
        KV* k_slot = block + geo.offset(0, kh, slot);
        KV* v_slot = block + geo.offset(1, kh, slot);
        const float* v = a.v + r * a.ldv + int64_t{kh} * HD;
        for (int i = t; i < HD; i += T) {
          k_slot[i] = kv_narrow<KV>(head[i]);
          v_slot[i] = kv_narrow<KV>(v[i]);
        }
      }
    }
    __syncthreads();  // s_head and s_part are rewritten by the next heads
  }
}

// Calls of at least this many rows take the by-row kernel (the same bits either way).
constexpr int64_t kByRowMinRows = 64;

// Runs of a row's heads (blocks a row) for R rows of `heads` heads in groups of `groups`: enough blocks for
// about four a multiprocessor, at most as many runs as rounds of groups (each run takes ceil(rounds / runs)
// rounds, so the last runs may be empty).
unsigned by_row_runs(int64_t R, int heads, int groups) {
  const int64_t rounds = (heads + groups - 1) / groups;
  const int64_t want = (4 * int64_t{sm_count()} + R - 1) / R;
  return static_cast<unsigned>(std::clamp<int64_t>(want, 1, rounds));
}

template <class KV>
void launch_by_row(const HeadPrepArgs& a, const KvArgs& kv, cudaStream_t stream) {
  const Geo geo = geo_of(kv);
  const int heads = a.num_heads + kv.num_kv_heads;
  if (kv.head_dim == 128) {
    const dim3 grid(static_cast<unsigned>(kv.R), by_row_runs(kv.R, heads, 256 / 64));
    launch_pdl(qk_norm_rope_kv_store_by_row_kernel<KV, 128>, grid, 256, 0, stream, a, kv.rows, kv.ptrs, geo);
  } else {
    const dim3 grid(static_cast<unsigned>(kv.R), by_row_runs(kv.R, heads, 256 / 128));
    launch_pdl(qk_norm_rope_kv_store_by_row_kernel<KV, 256>, grid, 256, 0, stream, a, kv.rows, kv.ptrs, geo);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void qk_norm_rope_kv_store(const HeadPrepArgs& a, const KvArgs& kv, cudaStream_t stream) {
  const int64_t blocks = a.q_rows * a.num_heads + kv.R * kv.num_kv_heads;
  if (blocks == 0) return;
  if (a.q_pos == nullptr && a.q_rows == kv.R && kv.R >= kByRowMinRows && (kv.head_dim == 128 || kv.head_dim == 256) &&
      a.rot_dim <= kv.head_dim) {
    if (kv.bf16)
      launch_by_row<KvBf16>(a, kv, stream);
    else
      launch_by_row<float>(a, kv, stream);
    return;
  }
  launch_pdl(kv.bf16 ? qk_norm_rope_kv_store_kernel<KvBf16> : qk_norm_rope_kv_store_kernel<float>,
             static_cast<unsigned>(blocks), norm_threads(kv.head_dim), static_cast<size_t>(kv.head_dim) * sizeof(float),
             stream, a, kv.rows, kv.ptrs, geo_of(kv));
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
