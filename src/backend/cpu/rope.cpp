// Rotate-half RoPE (models.md §1.3), partial when rot_dim < head_dim. cos/sin follow transformers'
// f32 recipe: inv_freq_i = 1 / theta^(2i/rot_dim) in f32, angle = inv_freq_i * position in f32.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/row_parallel.h"
#include "core/error.h"

namespace specserve::cpu {

void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta, std::span<const int32_t> positions) {
  SS_CHECK(x.dtype == DType::F32 && x.ndim() == 2 && x.strides[1] == 1, "rope: f32 rows expected, got {}", x.describe());
  SS_CHECK(x.dim(1) == int64_t{heads} * head_dim, "rope: {} is not {} heads of {}", x.describe(), heads, head_dim);
  SS_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "rope: bad rotary dim {} (head_dim {})", rot_dim,
           head_dim);
  SS_CHECK(static_cast<int64_t>(positions.size()) == x.dim(0), "rope: {} positions for {} rows", positions.size(),
           x.dim(0));
  const int half = rot_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    float e = static_cast<float>(2 * i) / static_cast<float>(rot_dim);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta), e);
  }
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
