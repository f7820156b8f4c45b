// Rotate-half RoPE (docs/MODELS.md §1.3), partial when rot_dim < head_dim. cos/sin follow transformers'
// f32 recipe: inv_freq_i = 1 / theta^(2i/rot_dim) in f32, angle = inv_freq_i * position in f32.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/op_checks.h"
#include "backend/cpu/row_parallel.h"
#include "core/error.h"

namespace specserve::cpu {

void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta, std::span<const int32_t> positions) {
  check_rope_operands(x, heads, head_dim, rot_dim, positions.size());
  const int half = rot_dim / 2;
  const std::vector<float> inv_freq = rope_inv_freq(theta, rot_dim);
  float* base = x.as<float>();
  const int64_t ld = x.strides[0];
  for_rows(x.dim(0), int64_t{heads} * rot_dim * 4, [&](int64_t r0, int64_t r1) {
    std::vector<float> c(half), s(half);
    for (int64_t r = r0; r < r1; ++r) {
      const float pos = static_cast<float>(positions[r]);
      for (int i = 0; i < half; ++i) {
        float angle = inv_freq[i] * pos;
        c[i] = std::cos(angle);
        s[i] = std::sin(angle);
      }
      for (int h = 0; h < heads; ++h) {
        float* v = base + r * ld + int64_t{h} * head_dim;
        for (int i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] + (-b) * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

}  // namespace specserve::cpu
