// The Gated DeltaNet block of Qwen3.5/3.6 (docs/MODELS.md §3.3): projections, causal conv + SiLU, f32
// gates and L2 norms, the gated delta rule (chunked for prefill, stepped for decode/extend), the
// gated output norm and out_proj; plus commit() for rollback after a partially accepted extend.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "model/layers.h"

namespace specserve {

namespace {

// window <- the last Kc-1 rows of [window; rows[0..n)], as copies appended to `copies` (done later in
// one Memory::copy_many). A shift within the window goes to a fresh buffer (device copies must not
// overlap); the replaced buffer moves to `retired`, which the caller keeps until the copies are
// enqueued (freed earlier, the allocator could hand it out as another copy's destination).
void advance_window(const Memory& mem, Buffer& window, const float* rows, int64_t n, int64_t C, int64_t keep,
                    std::vector<CopyRegion>& copies, std::vector<Buffer>& retired) {
  if (keep == 0 || n == 0) return;
  if (n >= keep) {
    copies.push_back({window.f32(), rows + (n - keep) * C, static_cast<size_t>(keep * C) * 4});
  } else {
    Buffer next(mem, window.bytes());
    copies.push_back({next.f32(), window.f32() + n * C, static_cast<size_t>((keep - n) * C) * 4});
    copies.push_back({next.f32() + (keep - n) * C, rows, static_cast<size_t>(n * C) * 4});
    retired.push_back(std::move(window));
    window = std::move(next);
  }
}

// The copy dst <- rows [n, width] floats starting at src (dst grown first when needed).
CopyRegion save_region(const Memory& mem, Buffer& dst, const float* src, int64_t n, int64_t width) {
  const size_t bytes = static_cast<size_t>(n * width) * 4;
  dst.reserve(mem, bytes);
  return {dst.data(), src, bytes};
}

}  // namespace

DeltaNetBlock load_deltanet(WeightStore& w, const ArchSpec& s, int i, int slot) {
  const std::string p = "layers." + std::to_string(i) + ".linear_attn.";
  const GdnDims& d = s.gdn;
  DeltaNetBlock b;
  b.in_qkv = w.text_linear(p + "in_proj_qkv.weight", {d.conv_dim(), s.hidden});
  b.in_z = w.text_linear(p + "in_proj_z.weight", {d.value_dim(), s.hidden});
  b.in_b = w.text_linear(p + "in_proj_b.weight", {d.num_v_heads, s.hidden});
  b.in_a = w.text_linear(p + "in_proj_a.weight", {d.num_v_heads, s.hidden});
  b.out_proj = w.text_linear(p + "out_proj.weight", {s.hidden, d.value_dim()});
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
  const Memory& mem = *ctx.mem;
  const int64_t R = ctx.rows, C = d.conv_dim(), Hv = d.num_v_heads, keep = d.conv_kernel - 1;
  MemTensor pre = MemTensor::empty(mem, DType::F32, {R, C});
  MemTensor z = MemTensor::empty(mem, DType::F32, {R, d.value_dim()});
  MemTensor beta = MemTensor::empty(mem, DType::F32, {R, Hv});
  MemTensor g = MemTensor::empty(mem, DType::F32, {R, Hv});
  TensorView ws[] = {in_qkv, in_z, in_b, in_a};
  TensorView ys[] = {pre, z, beta, g};
  ctx.matmul_multi(x, ws, ys);

  MemTensor qkv = MemTensor::empty(mem, DType::F32, {R, C});
  std::vector<ConvSpan> conv_spans;
  for (const auto& sp : ctx.spans)
    conv_spans.push_back(
        {ModelInternals::deltanet(*sp.state, slot).window.view(DType::F32, {keep, C}), sp.row_begin, sp.rows});
  ops.causal_conv_silu_spans(pre, conv_spans, conv, qkv);
  ops.gdn_prepare(qkv, g, beta, a_log, dt_bias, d);  // g <- log-decay, beta <- sigmoid(b)

  // The prefill spans' window advances and the extend spans' pending rows: one copy_many (one launch
  // on a device).
  std::vector<CopyRegion> saves;
  std::vector<Buffer> retired;
  std::vector<GdnSpan> spans;
  for (const auto& sp : ctx.spans) {
    auto& L = ModelInternals::deltanet(*sp.state, slot);
    const float* pre_rows = pre.as<float>() + sp.row_begin * C;
    if (sp.mode == SpanMode::Prefill) {
      spans.push_back({L.state.f32(), sp.row_begin, sp.rows, sp.position, true});
      advance_window(mem, L.window, pre_rows, sp.rows, C, keep, saves, retired);
    } else {
      // The committed state stays untouched until commit(): the first step reads it, all writes go
      // to the work buffer (no copy).
      L.work.reserve(mem, L.state.bytes());
      spans.push_back({L.work.f32(), sp.row_begin, sp.rows, sp.position, false, L.state.f32()});
      saves.push_back(save_region(mem, L.pending_pre, pre_rows, sp.rows, C));
      saves.push_back(save_region(mem, L.pending_qkv, qkv.as<float>() + sp.row_begin * C, sp.rows, C));
      saves.push_back(save_region(mem, L.pending_g, g.as<float>() + sp.row_begin * Hv, sp.rows, Hv));
      saves.push_back(save_region(mem, L.pending_beta, beta.as<float>() + sp.row_begin * Hv, sp.rows, Hv));
      L.pending_rows = sp.rows;
    }
  }
  mem.copy_many(saves);
  MemTensor core = MemTensor::empty(mem, DType::F32, {R, d.value_dim()});
  ops.gated_delta_rule(qkv, g, beta, spans, d, core);
  ops.rms_norm_gated(core, z, norm, s.eps, core);
  ctx.matmul(core, out_proj, out);
}

void DeltaNetBlock::commit(const Ops& ops, const Memory& mem, const ArchSpec& spec, std::span<const Commit> commits,
                           std::vector<CopyRegion>& copies, std::vector<Buffer>& retired) const {
  const GdnDims& d = spec.gdn;
  const int64_t C = d.conv_dim(), Hv = d.num_v_heads;
  // The partial acceptances' kept rows, gathered: [rows, C], [rows, Hv], [rows, Hv].
  std::vector<GdnSpan> spans;
  std::vector<CopyRegion> gather;
  int64_t rows = 0;
  for (const Commit& c : commits) {
    auto& L = ModelInternals::deltanet(*c.state, slot);
    const int64_t K = L.pending_rows;
    SS_CHECK(c.n >= 1 && c.n <= K, "commit: {} rows of a {}-row extend", c.n, K);
    if (c.n < K) {
      spans.push_back({L.state.f32(), rows, c.n, 0, false});
      rows += c.n;
    }
  }
  MemTensor qkv, g, beta;
  if (rows > 0) {
    qkv = MemTensor::empty(mem, DType::F32, {rows, C});
    g = MemTensor::empty(mem, DType::F32, {rows, Hv});
    beta = MemTensor::empty(mem, DType::F32, {rows, Hv});
  }
  size_t replayed = 0;
  for (const Commit& c : commits) {
    auto& L = ModelInternals::deltanet(*c.state, slot);
    if (c.n == L.pending_rows) {
      std::swap(L.state, L.work);
    } else {
      // Replay the kept rows through the same recurrence decode runs.
      const int64_t at = spans[replayed++].row_begin;
      gather.push_back({qkv.as<float>() + at * C, L.pending_qkv.f32(), static_cast<size_t>(c.n * C) * 4});
      gather.push_back({g.as<float>() + at * Hv, L.pending_g.f32(), static_cast<size_t>(c.n * Hv) * 4});
      gather.push_back({beta.as<float>() + at * Hv, L.pending_beta.f32(), static_cast<size_t>(c.n * Hv) * 4});
    }
    advance_window(mem, L.window, L.pending_pre.f32(), c.n, C, d.conv_kernel - 1, copies, retired);
    L.pending_rows = 0;
  }
  if (rows == 0) return;
  mem.copy_many(gather);
  MemTensor scratch = MemTensor::empty(mem, DType::F32, {rows, d.value_dim()});
  ops.gated_delta_rule(qkv, g, beta, spans, d, scratch);
}

}  // namespace specserve
