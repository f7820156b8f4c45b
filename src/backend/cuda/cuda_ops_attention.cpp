// CudaOps' attention ops: storing K/V rows in the cache, the fused head preparation (q/k norms, RoPE,
// KV store) and attention itself (the prefill kernel, the free-order kernel, the row-invariant one).
#include <algorithm>
#include <vector>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/matmul_free_order.h"
#include "backend/cuda/staging.h"
#include "backend/cuda/step_graphs.h"
#include "backend/head_rows.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specserve::cuda {

void CudaOps::kv_store(const TensorView& kt, const TensorView& v, const KvGeometry& geo, int layer,
                       std::span<const AttentionRow> rows) const {
  on_device("kv_store", kt);
  on_device("kv_store", v);
  const int64_t width = int64_t{geo.num_kv_heads} * geo.head_dim;
  SS_CHECK(kt.dtype == DType::F32 && v.dtype == DType::F32 && kt.ndim() == 2 && v.ndim() == 2 && kt.dim(1) == width &&
               v.dim(1) == width && kt.strides[1] == 1 && v.strides[1] == 1,
           "kv_store: k {} / v {} must be f32 [rows, {}]", kt.describe(), v.describe(), width);
  SS_CHECK(kt.dim(0) == static_cast<int64_t>(rows.size()) && v.dim(0) == kt.dim(0), "kv_store: {} rows for {} specs",
           kt.dim(0), rows.size());
  SS_CHECK(layer >= 0 && layer < geo.num_layers, "kv_store: layer {} outside [0, {})", layer, geo.num_layers);
  if (rows.empty()) return;
  auto& staging = cuda::Staging::global();
  auto lock = staging.lock();
  const StagedKv s = stage_kv(staging, geo, layer, rows);
  k::kv_store(s.args, kt.as<const float>(), kt.strides[0], v.as<const float>(), v.strides[0], cuda::launch_stream());
}

// The same operand checks as the calls it fuses (rms_norm, rope, kv_store), then one launch.
void CudaOps::qk_norm_rope_kv_store(const TensorView& q, const TensorView& kt, const TensorView& v, const QkPrep& prep,
                                    const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) const {
  SS_CHECK(q.ndim() == 2 && q.dim(0) == static_cast<int64_t>(rows.size()), "qk_norm_rope_kv_store: q {} for {} rows",
           q.describe(), rows.size());
  head_prep(q, q, {}, true, kt, v, prep, geo, layer, rows);
}

void CudaOps::qk_norm_rope_kv_store_from(const TensorView& q_in, const TensorView& q_out, const TensorView& kt,
                                         const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                         std::span<const AttentionRow> rows) const {
  SS_CHECK(q_out.ndim() == 2 && q_out.dim(0) == static_cast<int64_t>(rows.size()),
           "qk_norm_rope_kv_store: q {} for {} rows", q_out.describe(), rows.size());
  head_prep(q_in, q_out, {}, true, kt, v, prep, geo, layer, rows);
}

void CudaOps::qk_norm_rope_kv_store_rows(const TensorView& q, std::span<const int32_t> q_positions,
                                         const TensorView& kt, const TensorView& v, const QkPrep& prep,
                                         const KvGeometry& geo, int layer,
                                         std::span<const AttentionRow> kv_rows) const {
  head_prep(q, q, q_positions, false, kt, v, prep, geo, layer, kv_rows);
}

// Both head preparations in one launch (head_prep.cu); q's positions are the KV rows' when
// q_at_kv_rows, else q_positions (staged with the rows). q's heads are read from q_in (q itself, or
// a head_rows.h view of as many rows and heads) and written to q.
void CudaOps::head_prep(const TensorView& q_in, const TensorView& q, std::span<const int32_t> q_positions,
                        bool q_at_kv_rows, const TensorView& kt, const TensorView& v, const QkPrep& prep,
                        const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) const {
  const int hd = geo.head_dim;
  const int heads = check_qk_heads(q, hd);
  const size_t q_rows = q_at_kv_rows ? rows.size() : q_positions.size();
  if (q.dim(0) > 0) check_norm("qk_norm_rope_kv_store", q, q, prep.q_norm);
  if (q.dim(0) > 0) on_device("qk_norm_rope_kv_store", q_in);
  const HeadRows in = check_head_rows("qk_norm_rope_kv_store", q_in, heads, hd);
  SS_CHECK(in.rows == q.dim(0), "qk_norm_rope_kv_store: q_in {} for q {}", q_in.describe(), q.describe());
  check_norm("qk_norm_rope_kv_store", kt, kt, prep.k_norm);
  SS_CHECK(prep.q_norm.numel() == hd && prep.k_norm.numel() == hd,
           "qk_norm_rope_kv_store: head norms {} / {} for head_dim {}", prep.q_norm.describe(), prep.k_norm.describe(),
           hd);
  check_rope_operands(q, heads, hd, prep.rot_dim, q_rows);
  check_rope_operands(kt, geo.num_kv_heads, hd, prep.rot_dim, rows.size());
  on_device("qk_norm_rope_kv_store", v);
  SS_CHECK(
      v.dtype == DType::F32 && v.ndim() == 2 && v.dim(1) == kt.dim(1) && v.dim(0) == kt.dim(0) && v.strides[1] == 1,
      "qk_norm_rope_kv_store: k {} / v {} disagree", kt.describe(), v.describe());
  SS_CHECK(layer >= 0 && layer < geo.num_layers, "qk_norm_rope_kv_store: layer {} outside [0, {})", layer,
           geo.num_layers);
  if (rows.empty() && q_rows == 0) return;
  const std::vector<float> inv_freq = rope_inv_freq(prep.theta, prep.rot_dim);  // as rope()
  auto& staging = cuda::Staging::global();
  auto lock = staging.lock();
  const StagedKv s = stage_kv(staging, geo, layer, rows);
  k::HeadPrepArgs a;
  a.inv_freq = static_cast<const float*>(staging.stage(inv_freq.data(), inv_freq.size() * sizeof(float)));
  if (!q_at_kv_rows && !q_positions.empty())
    a.q_pos = static_cast<const int32_t*>(staging.stage(q_positions.data(), q_positions.size() * sizeof(int32_t)));
  a.q_rows = static_cast<int64_t>(q_rows);
  a.q = q.dim(0) > 0 ? q.as<float>() : nullptr;
  a.ldq = q.strides[0];
  a.q_in = q.dim(0) > 0 ? q_in.as<const float>() : nullptr;
  a.ldq_in = in.ld;
  a.q_head_stride = in.head_stride;
  a.k = kt.as<float>();
  a.ldk = kt.strides[0];
  a.v = v.as<const float>();
  a.ldv = v.strides[0];
  a.q_norm = prep.q_norm.as<const float>();
  a.k_norm = prep.k_norm.as<const float>();
  a.kind = prep.norm == NormKind::Plain ? 0 : 1;
  a.eps = prep.eps;
  a.num_heads = heads;
  a.rot_dim = prep.rot_dim;
  k::qk_norm_rope_kv_store(a, s.args, cuda::launch_stream());
}

void CudaOps::attention_prefill(const TensorView& q, const KvGeometry& geo, int layer,
                                std::span<const AttentionRow> rows, int num_heads, float scale, const TensorView& out,
                                const TensorView* gate) const {
  // The flash-attention kernel (attention_prefill.cu) for head dims 128 and 256 without windows; any other
  // call is served by attention() (deterministic per row too: it is row-invariant). out may be q: a CTA
  // reads its rows' q of its head before it writes their out.
  bool kernel = k::attention_prefill_supports(geo.head_dim) && !rows.empty();
  for (const auto& row : rows) kernel = kernel && row.window_start == 0;
  if (!kernel) {
    Ops::attention_prefill(q, geo, layer, rows, num_heads, scale, out, gate);  // attention(), then the gate
    return;
  }
  on_device("attention_prefill", q);
  on_device("attention_prefill", out);
  const int64_t width = int64_t{num_heads} * geo.head_dim;
  SS_CHECK(q.dtype == DType::F32 && out.dtype == DType::F32 && q.ndim() == 2 && out.ndim() == 2 && q.dim(1) == width &&
               out.dim(1) == width && q.strides[1] == 1 && out.strides[1] == 1,
           "attention_prefill: q {} / out {} must be f32 [rows, {}]", q.describe(), out.describe(), width);
  SS_CHECK(q.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(0) == q.dim(0),
           "attention_prefill: {} rows for {} specs", q.dim(0), rows.size());
  SS_CHECK(geo.num_kv_heads > 0 && num_heads > 0 && num_heads % geo.num_kv_heads == 0,
           "attention_prefill: {} heads not a multiple of {} KV heads", num_heads, geo.num_kv_heads);
  SS_CHECK(layer >= 0 && layer < geo.num_layers, "attention_prefill: layer {} outside [0, {})", layer, geo.num_layers);
  // The output gate, read in place: every element of out is multiplied by its own gate element.
  k::OutGate g;
  if (gate != nullptr) {
    on_device("attention_prefill", *gate);
    const HeadRows h = check_head_rows("attention_prefill", *gate, num_heads, geo.head_dim);
    SS_CHECK(h.rows == q.dim(0), "attention_prefill: gate {} for {} rows", gate->describe(), q.dim(0));
    g = {gate->as<const float>(), h.ld, h.head_stride};
  }
  auto& staging = cuda::Staging::global();
  auto lock = staging.lock();
  StagedKv s = stage_kv(staging, geo, layer, rows);
  s.args.host_rows = s.host_rows.data();
  const k::AttentionPrefillPlan plan = k::attention_prefill_plan(s.args);
  // The o projection's bf16 copy of out, written by the kernel (kernels.h: XbOut) where it can.
  const k::XbOut xb = k::attention_prefill_writes_xb(s.args) ? xb_for(q.dim(0), width) : k::XbOut{};
  k::attention_prefill(s.args, plan, q.as<const float>(), q.strides[0], num_heads, scale, out.as<float>(),
                       out.strides[0], cuda::launch_stream(), xb, g);
  note_xb(out.data, out.strides[0], q.dim(0), width, xb);
}

void CudaOps::attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                        int num_heads, float scale, const TensorView& out) const {
  on_device("attention", q);
  on_device("attention", out);
  const int hd = geo.head_dim;
  const int64_t width = int64_t{num_heads} * hd;
  SS_CHECK(q.dtype == DType::F32 && out.dtype == DType::F32 && q.ndim() == 2 && out.ndim() == 2 && q.dim(1) == width &&
               out.dim(1) == width && q.strides[1] == 1 && out.strides[1] == 1,
           "attention: q {} / out {} must be f32 [rows, {}]", q.describe(), out.describe(), width);
  SS_CHECK(q.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(0) == q.dim(0), "attention: {} rows for {} specs",
           q.dim(0), rows.size());
  SS_CHECK(geo.num_kv_heads > 0 && num_heads % geo.num_kv_heads == 0,
           "attention: {} heads not a multiple of {} KV heads", num_heads, geo.num_kv_heads);
  SS_CHECK(k::attention_supports(hd), "attention: head_dim {} unsupported on CUDA (a multiple of 32 up to 256)", hd);
  SS_CHECK(layer >= 0 && layer < geo.num_layers, "attention: layer {} outside [0, {})", layer, geo.num_layers);
  for (const auto& row : rows)
    SS_CHECK(row.window_start >= 0 && row.window_start <= row.position,
             "attention: window start {} outside [0, position {}]", row.window_start, row.position);
  SS_CHECK(k::attention_group_supported(num_heads, geo.num_kv_heads),
           "attention: {} query heads per KV head unsupported on CUDA (at most 16)", num_heads / geo.num_kv_heads);
  if (rows.empty()) return;
  int64_t chunks = 1;
  for (const auto& row : rows)
    chunks = std::max(chunks, k::attention_chunks(int64_t{row.position} + 1 - row.window_start));
  // The per-chunk partial results of at most ~64 MB of rows at a time.
  const int64_t per_row = k::attention_scratch_floats(1, num_heads, hd, chunks);
  const int64_t group = std::clamp<int64_t>((int64_t{16} << 20) / per_row, 1, static_cast<int64_t>(rows.size()));
  auto& staging = cuda::Staging::global();
  auto lock = staging.lock();
  StagedKv s = stage_kv(staging, geo, layer, rows);
  // The drafter's forward (MatmulOrder::Free) takes the free-order kernel where its plan does not decline.
  s.args.host_rows = s.host_rows.data();
  if (t_matmul_order == MatmulOrder::Free) {
    const k::AttentionFreePlan plan = k::attention_free_plan(s.args, num_heads);
    if (!plan.declined()) {
      Buffer part(cuda_memory(), static_cast<size_t>(plan.scratch_floats) * sizeof(float));
      k::attention_free(s.args, plan, q.as<const float>(), q.strides[0], num_heads, scale, out.as<float>(),
                        out.strides[0], static_cast<float*>(part.data()), cuda::launch_stream());
      cuda::count_free_order_attention();
      return;
    }
  }
  Buffer scratch(cuda_memory(), static_cast<size_t>(group * per_row) * sizeof(float));
  const k::KvRow* all_rows = s.args.rows;
  const int64_t R = s.args.R;
  // One launch (verify, decode): its combine kernel can write the output's copy for the o projection.
  const k::XbOut xb = group >= R ? xb_for(R, width) : k::XbOut{};
  for (int64_t r0 = 0; r0 < R; r0 += group) {
    s.args.rows = all_rows + r0;
    s.args.host_rows = s.host_rows.data() + r0;
    s.args.R = std::min(group, R - r0);
    k::attention(s.args, q.as<const float>() + r0 * q.strides[0], q.strides[0], num_heads, scale,
                 out.as<float>() + r0 * out.strides[0], out.strides[0], static_cast<float*>(scratch.data()), chunks,
                 cuda::launch_stream(), xb);
  }
  note_xb(out.data, out.strides[0], R, width, xb);
}

}  // namespace specserve::cuda
