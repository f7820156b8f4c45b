// Default implementations of the Ops that a backend may do in fewer launches.
#include "backend/ops.h"

#include "core/error.h"

namespace specserve {

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

}  // namespace specserve
