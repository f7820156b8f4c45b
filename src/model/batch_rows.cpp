// BatchContext's per-kind ops (layers.h): a forward's rows run through the kernels of their kind —
// extend rows (decode, verify) through the row-invariant ops, prefill rows through the prefill ops
// (docs/DESIGN.md §1.1–1.2). Each maximal run of one kind is one call on its rows' view; the engine
// puts extend spans before prefill chunks, so a mixed step makes two calls per op.
#include "core/error.h"
#include "model/layers.h"

namespace specserve {

namespace {
TensorView rows_of(const TensorView& t, int64_t begin, int64_t n) { return t.rows(begin, begin + n); }
}  // namespace

void copy_logit_rows(const Memory& mem, const TensorView& x, std::span<const int64_t> rows, const TensorView& out) {
  const int64_t H = x.dim(1);
  std::vector<CopyRegion> runs;
  const size_t row_bytes = static_cast<size_t>(H) * 4;
  for (size_t i = 0; i < rows.size(); ++i) {
    const float* src = x.as<const float>() + rows[i] * H;
    if (!runs.empty() &&
        static_cast<const char*>(runs.back().src) + runs.back().bytes == reinterpret_cast<const char*>(src))
      runs.back().bytes += row_bytes;
    else
      runs.push_back({out.as<float>() + static_cast<int64_t>(i) * H, src, row_bytes});
  }
  mem.copy_many(runs);
}

void BatchContext::build_runs() {
  runs.clear();
  for (const Span& sp : spans) {
    const bool prefill = sp.mode == SpanMode::Prefill;
    if (!runs.empty() && runs.back().prefill == prefill && runs.back().row_begin + runs.back().rows == sp.row_begin)
      runs.back().rows += sp.rows;
    else
      runs.push_back({sp.row_begin, sp.rows, prefill});
  }
}

void BatchContext::matmul(const TensorView& x, const TensorView& w, const TensorView& y) const {
  for (const RowRun& r : runs) {
    const bool whole = runs.size() == 1;
    const TensorView xr = whole ? x : rows_of(x, r.row_begin, r.rows);
    const TensorView yr = whole ? y : rows_of(y, r.row_begin, r.rows);
    if (r.prefill)
      ops->matmul_prefill(xr, w, yr);
    else
      ops->matmul(xr, w, yr);
  }
}

void BatchContext::matmul_multi(const TensorView& x, std::span<const TensorView> ws,
                                std::span<const TensorView> ys) const {
  std::vector<TensorView> yr(ys.size());
  for (const RowRun& r : runs) {
    const bool whole = runs.size() == 1;
    for (size_t i = 0; i < ys.size(); ++i) yr[i] = whole ? ys[i] : rows_of(ys[i], r.row_begin, r.rows);
    const TensorView xr = whole ? x : rows_of(x, r.row_begin, r.rows);
    if (r.prefill)
      ops->matmul_multi_prefill(xr, ws, yr);
    else
      ops->matmul_multi(xr, ws, yr);
  }
}

void BatchContext::attention(const TensorView& q, int layer, int num_heads, float scale, const TensorView& out,
                             const TensorView* gate) const {
  for (const RowRun& r : runs) {
    const bool whole = runs.size() == 1;
    const TensorView qr = whole ? q : rows_of(q, r.row_begin, r.rows);
    const TensorView outr = whole ? out : rows_of(out, r.row_begin, r.rows);
    TensorView gr;
    if (gate != nullptr) gr = whole ? *gate : rows_of(*gate, r.row_begin, r.rows);
    const std::span<const AttentionRow> rows(attn_rows.data() + r.row_begin, static_cast<size_t>(r.rows));
    if (r.prefill) {
      ops->attention_prefill(qr, kv, layer, rows, num_heads, scale, outr, gate != nullptr ? &gr : nullptr);
    } else {
      ops->attention(qr, kv, layer, rows, num_heads, scale, outr);
      if (gate != nullptr) ops->mul_sigmoid(outr, gr);
    }
  }
}

void BatchContext::swiglu_mlp(const TensorView& x, const TensorView& gate, const TensorView& up, const TensorView& down,
                              const TensorView& g, const TensorView& u, const TensorView& out) const {
  // Each run's three steps back to back, so that the down projection follows the op that wrote its input
  // (on CUDA it then reads that op's bf16 copy: ops.h).
  for (const RowRun& r : runs) {
    const bool whole = runs.size() == 1;
    const TensorView xr = whole ? x : rows_of(x, r.row_begin, r.rows);
    const TensorView gr = whole ? g : rows_of(g, r.row_begin, r.rows);
    const TensorView ur = whole ? u : rows_of(u, r.row_begin, r.rows);
    const TensorView outr = whole ? out : rows_of(out, r.row_begin, r.rows);
    if (!(r.prefill && ops->matmul_prefill_swiglu(xr, gate, up, gr))) {
      const TensorView ws[] = {gate, up};
      const TensorView ys[] = {gr, ur};
      if (r.prefill)
        ops->matmul_multi_prefill(xr, ws, ys);
      else
        ops->matmul_multi(xr, ws, ys);
      ops->swiglu(gr, ur, gr);
    }
    if (r.prefill)
      ops->matmul_prefill(gr, down, outr);
    else
      ops->matmul(gr, down, outr);
  }
}

}  // namespace specserve
