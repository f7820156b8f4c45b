#pragma once
// Internal: the prefill attention kernel behind CudaOps::attention_prefill (attention_prefill.cu; the
// determinism rule it keeps heads that file). Plain C++ like kernels.h; every pointer is a device
// pointer unless named host.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

// Head dims the kernel serves (128: Qwen3; 256: Qwen3.5/3.6); others take Ops::attention.
bool attention_prefill_supports(int head_dim);

// The query tiles of a call: groups of at most 64 consecutive rows of one sequence at consecutive
// positions (a run of a prefill chunk, cut every 64 rows from the run's first row), as records of
// kPrefillTileInts ints: first row, rows, the last row's position. Longest key ranges first (they
// take longest), which changes no bits.
inline constexpr int kPrefillTileRows = 64;
inline constexpr int kPrefillTileInts = 3;
struct AttentionPrefillPlan {
  std::vector<int32_t> tiles;  // kPrefillTileInts per tile
  int64_t num_tiles() const { return static_cast<int64_t>(tiles.size()) / kPrefillTileInts; }
};
// From kv.host_rows (kv.R rows, every window_start 0, positions >= 0).
AttentionPrefillPlan attention_prefill_plan(const KvArgs& kv);

// Launches the kernel over the plan's tiles: out[r] = softmax(scale · q[r] · kᵀ) v over the keys at
// positions 0 .. rows[r].position of the row's sequence, per query head h with KV head h / (num_heads /
// kv.num_kv_heads); q, out [R, num_heads * head_dim] (row strides ldq, ldo). Every key and value at a
// position up to a tile's last row's must be stored. The caller holds the staging lock
// (Staging::global(), as for kv.rows): the tiles are staged through it.
// With xb.regs (kernels.h: XbOut for [R, num_heads * head_dim]) the kernel also writes out's bf16 copy for
// the o projection; only where attention_prefill_writes_xb(kv) (the wgmma or pipelined kernel, a bf16 cache).
// With gate.g (Qwen3.5/3.6's output gate, read in place: backend/head_rows.h) out is the attention times
// sigmoid(gate), the bits of mul_sigmoid over the ungated out; the bf16 copy holds the gated values.
struct OutGate {
  const float* g = nullptr;  // head h of row r at g + r * ld + h * head_stride
  int64_t ld = 0;
  int64_t head_stride = 0;
};
bool attention_prefill_writes_xb(const KvArgs& kv);
void attention_prefill(const KvArgs& kv, const AttentionPrefillPlan& plan, const float* q, int64_t ldq, int num_heads,
                       float scale, float* out, int64_t ldo, cudaStream_t stream, const XbOut& xb = {},
                       const OutGate& gate = {});

// How many query heads of one KV head a CTA serves, sharing each step's keys and values: Auto, two
// when the group (num_heads / num_kv_heads) is even (half the key and value traffic and conversions per
// head), else one; One: always one (tests and the benchmark compare both). A row's bits are the same
// either way: its arithmetic does not depend on the warp or CTA that computes it.
enum class PrefillHeads { Auto, One };
void set_prefill_heads(PrefillHeads h);
PrefillHeads prefill_heads();
int prefill_heads_per_cta(int group);

// Which kernel serves a bf16 cache: Wgmma (the default: warpgroup instructions, a producer warpgroup
// staging the steps; attention_prefill_wgmma_sm90a.cu; where the device has no sm_90a it falls back to
// Pipelined), Pipelined (its tiles copied by cp.async straight into double-buffered bf16 tiles, ldmatrix
// fragments, mma.sync, exp2) or Staged (the first kernel: f32-sized staging and a conversion pass each
// step; an f32 cache always takes it). Each is deterministic per row; their bits differ from each other
// (the benchmark compares them).
enum class PrefillKernel { Wgmma, Pipelined, Staged };
void set_prefill_kernel(PrefillKernel k);
PrefillKernel prefill_kernel();

// The Wgmma kernel's launch (attention_prefill_wgmma_sm90a.cu) over n_tiles tiles of a plan (device
// copy), heads_per_cta 1 or 2; false where it cannot serve (an f32 cache, no sm_90a device, a head dim
// other than 128 and 256): nothing was launched.
bool attention_prefill_wgmma(const KvArgs& kv, const int32_t* tiles, int64_t n_tiles, const float* q, int64_t ldq,
                             int num_heads, int heads_per_cta, float scale, float* out, int64_t ldo,
                             cudaStream_t stream, const XbOut& xb, const OutGate& gate);

// Calls of attention_prefill so far in this process (tests check that the kernel served a call).
uint64_t attention_prefill_calls();

}  // namespace specserve::cuda::kernels
