// RMSNorm flavours (docs/MODELS.md §1.1), all normalising in f32. The sum of squares uses the fixed-lane
// reduction of simd.h, so a row's result depends only on the row.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/row_parallel.h"
#include "backend/cpu/simd.h"
#include "core/error.h"

namespace specserve::cpu {

namespace {
void check_rows(const char* op, const TensorView& x, const TensorView& y, const TensorView& w) {
  SS_CHECK(x.dtype == DType::F32 && y.dtype == DType::F32 && w.dtype == DType::F32, "{}: f32 operands expected", op);
  SS_CHECK(x.is_contiguous() && y.is_contiguous() && w.is_contiguous(), "{}: contiguous operands expected", op);
  SS_CHECK(w.numel() > 0 && x.numel() % w.numel() == 0 && y.numel() == x.numel(),
           "{}: x {} / y {} not a whole number of groups of {}", op, x.describe(), y.describe(), w.numel());
}

inline float inv_rms(const float* x, int64_t d, float eps) {
  float mean = sum_squares(x, d) / static_cast<float>(d);
  return 1.0f / std::sqrt(mean + eps);
}
}  // namespace

void rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps, const TensorView& y) {
  check_rows("rms_norm", x, y, w);
  const int64_t d = w.numel(), groups = x.numel() / d;
  const float* xs = x.as<const float>();
  const float* ws = w.as<const float>();
  float* ys = y.as<float>();
  for_rows(groups, d * 4, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const float* xr = xs + g * d;
      float* yr = ys + g * d;
      const float r = inv_rms(xr, d, eps);
      if (kind == NormKind::Plain) {
        for (int64_t i = 0; i < d; ++i) yr[i] = ws[i] * (xr[i] * r);
      } else {
        for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] * r) * (1.0f + ws[i]);
      }
    }
  });
}

void rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps, const TensorView& y) {
  check_rows("rms_norm_gated", x, y, w);
  SS_CHECK(z.dtype == DType::F32 && z.is_contiguous() && z.numel() == x.numel(), "rms_norm_gated: gate {} vs x {}",
           z.describe(), x.describe());
  const int64_t d = w.numel(), groups = x.numel() / d;
  const float* xs = x.as<const float>();
  const float* zs = z.as<const float>();
  const float* ws = w.as<const float>();
  float* ys = y.as<float>();
  for_rows(groups, d * 8, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const float* xr = xs + g * d;
      const float* zr = zs + g * d;
      float* yr = ys + g * d;
      const float r = inv_rms(xr, d, eps);
      for (int64_t i = 0; i < d; ++i) yr[i] = (ws[i] * (xr[i] * r)) * silu(zr[i]);
    }
  });
}

}  // namespace specserve::cpu
