// argmax over rows (backend/ops.h): the sampler's greedy pick without the logits leaving the backend.
// A scalar scan in increasing index with a strict comparison, so ties keep the lowest index.
#include <cfloat>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/row_parallel.h"
#include "backend/op_checks.h"

namespace specserve::cpu {

void argmax(const TensorView& x, int64_t n, std::span<int32_t> out) {
  check_argmax_operands(x, n, out.size());
  for_rows(x.dim(0), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x.as<const float>() + r * x.strides[0];
      float best = -INFINITY;
      int32_t at = -1;
      for (int64_t i = 0; i < n; ++i) {
        float v = row[i];
        if (std::isnan(v)) continue;  // NaN reads as -inf: never the maximum
        if (v == INFINITY) v = FLT_MAX;
        if (v > best) best = v, at = static_cast<int32_t>(i);
      }
      out[static_cast<size_t>(r)] = at;  // -1: no finite entry (every entry -inf or NaN)
    }
  });
}

}  // namespace specserve::cpu
