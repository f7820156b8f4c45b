// The Gated DeltaNet block of Qwen3.5/3.6 (models.md §3.3): projections, causal conv + SiLU, f32
// gates and L2 norms, the gated delta rule (chunked for prefill, stepped for decode/extend), the
// gated output norm and out_proj; plus commit() for rollback after a partially accepted extend.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "model/layers.h"

namespace specserve {

namespace {

// window <- the last Kc-1 rows of [window; rows[0..n)].
void advance_window(std::vector<float>& window, const float* rows, int64_t n, int64_t C, int64_t keep) {
  if (keep == 0 || n == 0) return;
  if (n >= keep) {
    std::memcpy(window.data(), rows + (n - keep) * C, static_cast<size_t>(keep * C) * 4);
  } else {
    std::memmove(window.data(), window.data() + n * C, static_cast<size_t>((keep - n) * C) * 4);
    std::memcpy(window.data() + (keep - n) * C, rows, static_cast<size_t>(n * C) * 4);
  }
}

TensorView f32_view(std::vector<float>& v, const Shape& s) { return TensorView::contiguous(v.data(), DType::F32, s); }

}  // namespace

DeltaNetBlock load_deltanet(WeightStore& w, const ArchSpec& s, int i, int slot) {
  const std::string p = "layers." + std::to_string(i) + ".linear_attn.";
  const GdnDims& d = s.gdn;
  DeltaNetBlock b;
  b.in_qkv = w.text_matrix(p + "in_proj_qkv.weight", {d.conv_dim(), s.hidden});
  b.in_z = w.text_matrix(p + "in_proj_z.weight", {d.value_dim(), s.hidden});
  b.in_b = w.text_matrix(p + "in_proj_b.weight", {d.num_v_heads, s.hidden});
  b.in_a = w.text_matrix(p + "in_proj_a.weight", {d.num_v_heads, s.hidden});
  b.out_proj = w.text_matrix(p + "out_proj.weight", {s.hidden, d.value_dim()});
  b.conv = w.text_vector(p + "conv1d.weight", {d.conv_dim(), 1, d.conv_kernel}).reshape({d.conv_dim(), d.conv_kernel});
  b.a_log = w.text_vector(p + "A_log", {d.num_v_heads});
  b.dt_bias = w.text_vector(p + "dt_bias", {d.num_v_heads});
  b.norm = w.text_vector(p + "norm.weight", {d.v_dim});
  b.slot = slot;
  return b;
}

void DeltaNetBlock::forward(BatchContext& ctx, const TensorView& x, const TensorView& out) const {
  const Ops& ops = *ctx.ops;
  const ArchSpec& s = *ctx.spec;
  const GdnDims& d = s.gdn;
  const int64_t R = ctx.rows, C = d.conv_dim(), Hv = d.num_v_heads, keep = d.conv_kernel - 1;
  Tensor pre = Tensor::empty(DType::F32, {R, C});
  Tensor z = Tensor::empty(DType::F32, {R, d.value_dim()});
  Tensor beta = Tensor::empty(DType::F32, {R, Hv});
  Tensor g = Tensor::empty(DType::F32, {R, Hv});
  TensorView ws[] = {in_qkv, in_z, in_b, in_a};
  TensorView ys[] = {pre, z, beta, g};
  ops.matmul_multi(x, ws, ys);

  Tensor qkv = Tensor::empty(DType::F32, {R, C});
  for (const auto& sp : ctx.spans) {
    auto& L = ModelInternals::deltanet(*sp.state, slot);
    ops.causal_conv_silu(pre.view().rows(sp.row_begin, sp.row_begin + sp.rows), f32_view(L.window, {keep, C}), conv,
                         qkv.view().rows(sp.row_begin, sp.row_begin + sp.rows));
  }
  ops.gdn_prepare(qkv, g, beta, a_log, dt_bias, d);  // g <- log-decay, beta <- sigmoid(b)

  std::vector<GdnSpan> spans;
  for (const auto& sp : ctx.spans) {
    auto& L = ModelInternals::deltanet(*sp.state, slot);
    const float* pre_rows = pre.as<float>() + sp.row_begin * C;
    if (sp.mode == SpanMode::Prefill) {
      spans.push_back({L.state.data(), sp.row_begin, sp.rows, sp.position, true});
      advance_window(L.window, pre_rows, sp.rows, C, keep);
    } else {
      // The committed state stays untouched until commit(): the first step reads it, all writes go
      // to the work buffer (no copy).
      L.work.resize(L.state.size());
      spans.push_back({L.work.data(), sp.row_begin, sp.rows, sp.position, false, L.state.data()});
      L.pending_pre.assign(pre_rows, pre_rows + sp.rows * C);
      const float* q = qkv.as<float>() + sp.row_begin * C;
      L.pending_qkv.assign(q, q + sp.rows * C);
      L.pending_g.assign(g.as<float>() + sp.row_begin * Hv, g.as<float>() + (sp.row_begin + sp.rows) * Hv);
      L.pending_beta.assign(beta.as<float>() + sp.row_begin * Hv, beta.as<float>() + (sp.row_begin + sp.rows) * Hv);
    }
  }
  Tensor core = Tensor::empty(DType::F32, {R, d.value_dim()});
  ops.gated_delta_rule(qkv, g, beta, spans, d, core);
  ops.rms_norm_gated(core, z, norm, s.eps, core);
  ops.matmul(core, out_proj, out);
}

void DeltaNetBlock::commit(const Ops& ops, const ArchSpec& spec, SequenceState& seq, int64_t n) const {
  const GdnDims& d = spec.gdn;
  auto& L = ModelInternals::deltanet(seq, slot);
  const int64_t C = d.conv_dim(), Hv = d.num_v_heads;
  const int64_t K = static_cast<int64_t>(L.pending_g.size()) / Hv;
  SS_CHECK(n >= 1 && n <= K, "commit: {} rows of a {}-row extend", n, K);
  if (n == K) {
    std::swap(L.state, L.work);
  } else {
    // Replay the kept rows through the same recurrence decode runs.
    std::vector<float> scratch(static_cast<size_t>(K * d.value_dim()));
    GdnSpan span{L.state.data(), 0, n, 0, false};
    ops.gated_delta_rule(f32_view(L.pending_qkv, {K, C}), f32_view(L.pending_g, {K, Hv}),
                         f32_view(L.pending_beta, {K, Hv}), std::span(&span, 1), d,
                         f32_view(scratch, {K, d.value_dim()}));
  }
  advance_window(L.window, L.pending_pre.data(), n, C, d.conv_kernel - 1);
  L.pending_pre.clear();
  L.pending_qkv.clear();
  L.pending_g.clear();
  L.pending_beta.clear();
}

}  // namespace specserve
