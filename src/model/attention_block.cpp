// The (gated) full-attention block: Qwen3 (docs/MODELS.md §2.1) and Qwen3.5/3.6 (§3.2).
#include <cmath>
#include <cstring>

#include "backend/head_rows.h"
#include "core/error.h"
#include "model/layers.h"

namespace specserve {

AttentionBlock load_attention(WeightStore& w, const ArchSpec& s, int i, int slot) {
  const std::string p = "layers." + std::to_string(i) + ".self_attn.";
  const int64_t q_rows = int64_t{s.num_heads} * s.head_dim * (s.attn_output_gate ? 2 : 1);
  const int64_t kv_rows = int64_t{s.num_kv_heads} * s.head_dim;
  AttentionBlock b;
  b.q_proj = w.text_linear(p + "q_proj.weight", {q_rows, s.hidden});
  b.k_proj = w.text_linear(p + "k_proj.weight", {kv_rows, s.hidden});
  b.v_proj = w.text_linear(p + "v_proj.weight", {kv_rows, s.hidden});
  b.o_proj = w.text_linear(p + "o_proj.weight", {s.hidden, int64_t{s.num_heads} * s.head_dim});
  b.q_norm = w.text_vector(p + "q_norm.weight", {s.head_dim});
  b.k_norm = w.text_vector(p + "k_norm.weight", {s.head_dim});
  b.slot = slot;
  return b;
}

void AttentionBlock::forward(BatchContext& ctx, const TensorView& x, const TensorView& out) const {
  const Ops& ops = *ctx.ops;
  const ArchSpec& s = *ctx.spec;
  const int64_t R = ctx.rows, hd = s.head_dim;
  const int64_t qw = s.num_heads * hd, kvw = s.num_kv_heads * hd;
  const Memory& mem = *ctx.mem;
  MemTensor qfull = MemTensor::empty(mem, DType::F32, {R, q_proj.dim(0)});
  MemTensor k = MemTensor::empty(mem, DType::F32, {R, kvw});
  MemTensor v = MemTensor::empty(mem, DType::F32, {R, kvw});
  TensorView ws[] = {q_proj, k_proj, v_proj};
  TensorView ys[] = {qfull, k, v};
  ctx.matmul_multi(x, ws, ys);

  // Norms, RoPE (at the rows' positions) and the KV store in one call. All rows' keys go
  // in first: a row then sees exactly positions 0..its own, as in decode.
  const QkPrep prep{q_norm, k_norm, s.norm, s.eps, s.rot_dim, s.rope_theta};
  // Qwen3.5: each head's 2*hd outputs are [query | gate] (per head, not two flat halves). The head
  // preparation reads the queries where they are and writes them to q; the gate is read in place too.
  MemTensor q;
  TensorView gate;
  if (s.attn_output_gate) {
    const int heads = s.num_heads, d = static_cast<int>(hd);
    q = MemTensor::empty(mem, DType::F32, {R, qw});
    gate = head_slice(qfull, heads, d, hd);
    ops.qk_norm_rope_kv_store_from(head_slice(qfull, heads, d, 0), q, k, v, prep, ctx.kv, slot, ctx.attn_rows);
  } else {
    q = std::move(qfull);
    ops.qk_norm_rope_kv_store(q, k, v, prep, ctx.kv, slot, ctx.attn_rows);
  }
  MemTensor attn = MemTensor::empty(mem, DType::F32, {R, qw});
  // The output gate (Qwen3.5) is applied by the attention: in a prefill kernel's epilogue, which then writes
  // the o projection's bf16 copy of the gated rows.
  ctx.attention(q, slot, s.num_heads, 1.0f / std::sqrt(static_cast<float>(hd)), attn,
                s.attn_output_gate ? &gate : nullptr);
  ctx.matmul(attn, o_proj, out);
}

}  // namespace specserve
