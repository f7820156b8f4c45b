// Prefill attention on tensor cores (Ops::attention_prefill; docs/DESIGN.md §1.2, docs/KERNELS.md §3):
// flash attention over a prompt's rows, deterministic per row.
//
// THE RULE. A row's output bits depend only on its own query, its sequence's keys and values at positions
// 0 .. its position, the head dim and the scale — never on which other rows share the call or its query
// tile, on the chunks its prompt was cut into, or on R. They need not equal Ops::attention's.
//
// The kernels. A CTA takes one query tile (up to 64 consecutive rows of one sequence at consecutive
// positions; attention_prefill_plan) and one query head, or two of the same KV head (sharing each step's
// keys and values: prefill_heads()); warp w holds the tile's rows 16 (w % 4) .. 16 (w % 4) + 15 of head
// w / 4 as the rows of its m16n8k16 tiles. Keys are walked in steps of KB (64 for head dim 128, 32 for 256) at
// ABSOLUTE positions [KB·j, KB·j + KB), j = 0 up to the step holding the tile's last row. Per step: S = q kᵀ
// by mma.sync (q rounded to bf16, f32 accumulate, the head dim in 16-wide k-steps in increasing order);
// keys past the row's position get the score -inf; the online softmax of each row in f32 (running max
// m, rescale of l and O by e^(m_old - m_new), p = e^(s - m_new), l += p); P rounded to bf16 and
// O += P V by mma.sync (the step's keys in 16-wide k-steps in increasing order). out = O / l.
// Two kernels do this (prefill_kernel(); their bits differ, each keeps the rule):
// - pipelined (a bf16 cache, by default): the step's bf16 keys and values go by cp.async straight into
//   bf16 tiles of pitch HD + 8 (conflict-free ldmatrix), double-buffered: step j + 1 comes in while j is
//   computed, one barrier a step. q, k and v fragments by ldmatrix.x4 (a quarter of the 32-bit loads'
//   instructions); scores scaled by scale · log2(e) and exponentiated by ex2.approx (one MUFU op, against
//   expf's ~10 instructions); the key mask only in steps that reach past the warp's first row; the
//   rescale of O skipped when every factor of the warp is exactly 1. At head dim 128, q stays in shared
//   memory so that a thread fits 128 registers: two CTAs (16 warps) a multiprocessor.
// - staged (an f32 cache always; a bf16 one by set_prefill_kernel): the f32 or bf16 keys and values come
//   by cp.async into an f32-sized staging area and are rounded to bf16 tiles in a second pass; exp by expf.
//
// Why the rule holds:
// - An m16n8k16 output row depends only on its own A row and on B: a row's scores, and its P V sums,
//   are the same whichever rows sit beside it in the warp's tile (padding rows are zero queries), and
//   whichever warp computes them (one or two heads per CTA give the same bits).
// - Every row sees the same sequence of steps 0, 1, .. up to the step holding its own position; the
//   steps are at absolute positions, so they do not depend on where the prompt was cut or where the
//   tile starts. A row's quad of lanes always holds key columns 2·(lane % 4) + {0, 1} of each 8-key
//   tile, so its per-lane partial sums of l and their final reduction over the quad are the same too.
// - A tile's later rows make it walk steps past a row's own. In such a step all of the row's keys are
//   masked: its step max is -inf, m_new = m_old (finite: position 0 is visible in step 0, so m is finite
//   from step 0 on), the rescale exp(m_old - m_new) = exp(0) = 1 exactly, every p = exp(-inf) = 0, so
//   l and O are multiplied by 1 and l gains +0, and P V adds products 0 · v = 0 to O: the bits of m, l
//   and O are unchanged — provided v is finite. Values at positions up to the tile's last row's are
//   stored (every earlier chunk's and this tile's own), hence finite; slots past the tile's last
//   position may hold anything (NaN garbage of positions not yet written), so they are loaded as 0.
//   The same argument covers the keys of the row's own last step past its position: whether they hold
//   stored values (a later row of the same tile) or zeros (the tile ends at the row), p = 0 and the
//   products are exactly 0. (One corner is left: an O element that is exactly -0 would turn +0 by a
//   masked step's +0 products; with real or random values it is never exactly zero.)
// - The pipelined kernel's shortcuts change no row's bits. A step unmasked for a warp (its last key at
//   most the warp's first row's position) has every key visible to every real row of the warp, and a
//   visible key's score is the same masked or not; padding rows, unmasked, write nothing. The factor of
//   an unchanged max is set to 1 (not computed: the argument above needs it exactly 1), 2^-inf = +0 by
//   ex2.approx, and x · 1 = x, so skipping the rescale where all factors are 1 is the rescale.
// - The per-step key count KB depends on the head dim only.
// tests/backend_cuda/test_cuda_attention_prefill.cpp checks a prompt in one call against four other
// cuttings, the rows alone against the rows beside other sequences' and one head per CTA against two, bit
// for bit, and the CPU within bf16 tolerance, for both kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/attention_prefill_common.cuh"
#include "backend/cuda/attention_prefill_pipelined.cuh"
#include "backend/cuda/attention_prefill_staged.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/staging.h"
#include "core/error.h"

namespace specserve::cuda::kernels {

namespace {

std::atomic<uint64_t> g_calls{0};
std::atomic<int> g_heads{static_cast<int>(PrefillHeads::Auto)};
std::atomic<int> g_kernel{static_cast<int>(PrefillKernel::Wgmma)};

// Raises the kernel's shared-memory limit, once, before its first launch.
template <int HD, int H2, class KV>
void prefill_smem_attribute() {
  static const bool done = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<HD, H2, KV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    prefill_smem_bytes<HD, H2>()));
    return true;
  }();
  (void)done;
}

template <int HD, int H2>
void launch_pipelined(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq,
                      int num_heads, float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb,
                      const OutGate& gate) {
  static const bool attribute_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_pipelined_kernel<HD, H2>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, pipelined_smem_bytes<HD, H2>()));
    return true;
  }();
  (void)attribute_set;
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x log2(e))
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t t = 0; t < n_tiles; t += kMaxGridY) {
    const int64_t count = std::min(kMaxGridY, n_tiles - t);
    const dim3 grid(static_cast<unsigned>(num_heads / H2), static_cast<unsigned>(count));
    launch_pdl(attention_prefill_pipelined_kernel<HD, H2>, grid, prefill_threads<H2>(),
               static_cast<size_t>(pipelined_smem_bytes<HD, H2>()), stream, kv.rows, tiles + t * kPrefillTileInts,
               kv.ptrs, geo_of(kv), q, ldq, num_heads, scale_log2, out, ldo, kv.R, xb, gate);
    CUDA_CHECK_LAUNCH();
  }
}

template <int HD, int H2, class KV>
void launch_prefill(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq, int num_heads,
                    float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb, const OutGate& gate) {
  if constexpr (std::is_same_v<KV, KvBf16>) {
    if (prefill_kernel() == PrefillKernel::Wgmma &&
        attention_prefill_wgmma(kv, tiles, n_tiles, q, ldq, num_heads, H2, scale, out, ldo, stream, xb, gate))
      return;
    if (prefill_kernel() != PrefillKernel::Staged) {
      launch_pipelined<HD, H2>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
      return;
    }
  }
  prefill_smem_attribute<HD, H2, KV>();
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t t = 0; t < n_tiles; t += kMaxGridY) {
    const int64_t count = std::min(kMaxGridY, n_tiles - t);
    const dim3 grid(static_cast<unsigned>(num_heads / H2), static_cast<unsigned>(count));
    launch_pdl(attention_prefill_kernel<HD, H2, KV>, grid, prefill_threads<H2>(),
               static_cast<size_t>(prefill_smem_bytes<HD, H2>()), stream, kv.rows, tiles + t * kPrefillTileInts,
               kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, out, ldo, gate);
    CUDA_CHECK_LAUNCH();
  }
}

template <int HD, class KV>
void launch_prefill(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq, int num_heads,
                    float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb, const OutGate& gate) {
  if (prefill_heads_per_cta(num_heads / kv.num_kv_heads) == 2)
    launch_prefill<HD, 2, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
  else
    launch_prefill<HD, 1, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
}

template <class KV>
void launch_prefill_kv(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq,
                       int num_heads, float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb,
                       const OutGate& gate) {
  if (kv.head_dim == 128)
    launch_prefill<128, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
  else
    launch_prefill<256, KV>(kv, tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
}

}  // namespace

bool attention_prefill_supports(int head_dim) { return head_dim == 128 || head_dim == 256; }

void set_prefill_heads(PrefillHeads h) { g_heads.store(static_cast<int>(h), std::memory_order_relaxed); }
PrefillHeads prefill_heads() { return static_cast<PrefillHeads>(g_heads.load(std::memory_order_relaxed)); }
void set_prefill_kernel(PrefillKernel k) { g_kernel.store(static_cast<int>(k), std::memory_order_relaxed); }
PrefillKernel prefill_kernel() { return static_cast<PrefillKernel>(g_kernel.load(std::memory_order_relaxed)); }
int prefill_heads_per_cta(int group) {
  if (group % 2 != 0) return 1;
  return prefill_heads() == PrefillHeads::One ? 1 : 2;
}

AttentionPrefillPlan attention_prefill_plan(const KvArgs& kv) {
  struct Tile {
    int32_t first, rows, last;
  };
  std::vector<Tile> tiles;
  for (int64_t r = 0; r < kv.R; ++r) {
    const KvRow& row = kv.host_rows[r];
    if (!tiles.empty()) {
      Tile& t = tiles.back();
      const KvRow& prev = kv.host_rows[r - 1];
      if (t.rows < kPrefillTileRows && row.table == prev.table && row.position == prev.position + 1) {
        ++t.rows;
        t.last = row.position;
        continue;
      }
    }
    tiles.push_back({static_cast<int32_t>(r), 1, row.position});
  }
  // The tiles with the most keys first, so that the short ones fill the last wave.
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) { return a.last > b.last; });
  AttentionPrefillPlan pl;
  pl.tiles.reserve(tiles.size() * kPrefillTileInts);
  for (const Tile& t : tiles) pl.tiles.insert(pl.tiles.end(), {t.first, t.rows, t.last});
  return pl;
}

bool attention_prefill_writes_xb(const KvArgs& kv) { return kv.bf16 && prefill_kernel() != PrefillKernel::Staged; }

void attention_prefill(const KvArgs& kv, const AttentionPrefillPlan& plan, const float* q, int64_t ldq, int num_heads,
                       float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb,
                       const OutGate& gate) {
  SS_CHECK(xb.regs == nullptr || attention_prefill_writes_xb(kv), "attention_prefill: this kernel writes no XbOut");
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t n_tiles = plan.num_tiles();
  if (n_tiles == 0) return;
  // Read by the kernels enqueued next: the caller holds the staging lock (as for kv.rows).
  const auto* d_tiles =
      static_cast<const int32_t*>(Staging::global().stage(plan.tiles.data(), plan.tiles.size() * sizeof(int32_t)));
  if (kv.bf16)
    launch_prefill_kv<KvBf16>(kv, d_tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
  else
    launch_prefill_kv<float>(kv, d_tiles, n_tiles, q, ldq, num_heads, scale, out, ldo, stream, xb, gate);
}

uint64_t attention_prefill_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace specserve::cuda::kernels
