// Default implementations of the Ops that a backend may do in fewer launches.
#include "backend/ops.h"

#include <vector>

#include "backend/op_checks.h"
#include "core/error.h"

namespace specserve {

DType resolve_kv_dtype(std::string_view choice, DType weight_dtype) {
  if (choice == "f32") return DType::F32;
  if (choice == "bf16") return DType::BF16;
  SS_CHECK(choice == "auto", "--kv-dtype must be auto, bf16 or f32 (got '{}')", choice);
  return weight_dtype == DType::F32 ? DType::F32 : DType::BF16;
}

void Ops::causal_conv_silu_spans(const TensorView& x, std::span<const ConvSpan> spans, const TensorView& w,
                                 const TensorView& out) const {
  for (const auto& s : spans) {
    SS_CHECK(s.row_begin >= 0 && s.rows >= 0 && s.row_begin + s.rows <= x.dim(0) && x.dim(0) == out.dim(0),
             "causal_conv_silu: span [{}, {}) outside {} rows", s.row_begin, s.row_begin + s.rows, x.dim(0));
    causal_conv_silu(x.rows(s.row_begin, s.row_begin + s.rows), s.window, w,
                     out.rows(s.row_begin, s.row_begin + s.rows));
  }
}

void Ops::add_rms_norm(const TensorView& x, const TensorView& y, const TensorView& w, NormKind kind, float eps,
                       const TensorView& out) const {
  add(x, y);
  rms_norm(x, w, kind, eps, out);
}

void Ops::qk_norm_rope_kv_store(const TensorView& q, const TensorView& k, const TensorView& v, const QkPrep& prep,
                                const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) const {
  SS_CHECK(q.ndim() == 2 && q.dim(0) == static_cast<int64_t>(rows.size()), "qk_norm_rope_kv_store: q {} for {} rows",
           q.describe(), rows.size());
  std::vector<int32_t> positions;
  positions.reserve(rows.size());
  for (const auto& row : rows) positions.push_back(row.position);
  qk_norm_rope_kv_store_rows(q, positions, k, v, prep, geo, layer, rows);
}

void Ops::qk_norm_rope_kv_store_rows(const TensorView& q, std::span<const int32_t> q_positions, const TensorView& k,
                                     const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                     std::span<const AttentionRow> kv_rows) const {
  const int heads = check_qk_heads(q, geo.head_dim);
  std::vector<int32_t> kv_positions;
  kv_positions.reserve(kv_rows.size());
  for (const auto& row : kv_rows) kv_positions.push_back(row.position);
  if (q.dim(0) > 0) rms_norm(q, prep.q_norm, prep.norm, prep.eps, q);
  rms_norm(k, prep.k_norm, prep.norm, prep.eps, k);
  if (q.dim(0) > 0) rope(q, heads, geo.head_dim, prep.rot_dim, prep.theta, q_positions);
  rope(k, geo.num_kv_heads, geo.head_dim, prep.rot_dim, prep.theta, kv_positions);
  kv_store(k, v, geo, layer, kv_rows);
}

}  // namespace specserve
