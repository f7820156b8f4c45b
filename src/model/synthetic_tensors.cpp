#include "model/synthetic_tensors.h"

#include <cmath>
#include <functional>
#include <vector>

#include "backend/synthetic_fill.h"
#include "core/error.h"
#include "io/fp8_blocks.h"

namespace specserve {

namespace {
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
}  // namespace

TensorView SyntheticTensors::make(const std::string& name, const Shape& shape, DType dtype) {
  SS_CHECK(dtype == DType::F32 || dtype == DType::BF16, "synthetic tensor '{}': f32 or bf16 only", name);
  const auto n = static_cast<size_t>(shape.numel());
  const size_t bytes = n * dtype_size(dtype);
  require_room(memory_, bytes, "synthetic weight '" + name + "'");
  buffers_.emplace_back(memory_, bytes);
  bytes_ += bytes;
  float lo = -1.0f, hi = 1.0f;
  if (contains(name, "A_log")) {
    lo = 0.0f, hi = 2.0f;
  } else if (contains(name, "dt_bias")) {
    lo = -1.0f, hi = 1.0f;
  } else if (contains(name, "conv1d")) {
    lo = -0.5f, hi = 0.5f;
  } else if (contains(name, "norm")) {
    lo = zero_centred_norms_ ? -0.1f : 0.9f;
    hi = zero_centred_norms_ ? 0.1f : 1.1f;
  } else if (shape.ndim == 2 && !contains(name, "embed_tokens")) {
    const float a = std::sqrt(3.0f / static_cast<float>(shape[1]));
    lo = -a, hi = a;
  }
  const uint64_t key = seed_ ^ std::hash<std::string>{}(name);
  memory_.fill_uniform(buffers_.back().data(), dtype, n, key, lo, hi);
  return buffers_.back().view(dtype, shape);
}

TensorView SyntheticTensors::make_fp8(const std::string& name, const Shape& shape) {
  SS_CHECK(shape.ndim == 2, "synthetic fp8 weight '{}': a matrix, not {}", name, shape.to_string());
  const Shape grid = fp8_scale_shape(shape);
  const auto n = static_cast<size_t>(shape.numel()), scales = static_cast<size_t>(grid.numel());
  require_room(memory_, n + scales * 4, "synthetic fp8 weight '" + name + "'");
  buffers_.emplace_back(memory_, n);
  Buffer& codes = buffers_.back();
  buffers_.emplace_back(memory_, scales * 4);
  Buffer& scale = buffers_.back();
  bytes_ += n + scales * 4;
  const float a = std::sqrt(3.0f / static_cast<float>(shape[1]));  // the bf16 matrices' range (make)
  const uint64_t key = seed_ ^ std::hash<std::string>{}(name);
  memory_.fill_uniform(codes.data(), DType::F8_E4M3, n, key, -448.0f, 448.0f);
  // The scales are bf16 values, as Qwen's FP8 checkpoints store them (so the CUDA fp8 gemv takes the path it
  // takes on those): the seeded uniform values with their low 16 bits cleared (towards zero, so they stay
  // in range). Few: made here and uploaded.
  std::vector<float> s(scales);
  for (size_t i = 0; i < scales; ++i)
    s[i] = synthetic::f32_from_bits(
        synthetic::f32_bits(synthetic::uniform_at(key ^ 0x5CA1E5ull, i, 0.9f * a / 448.0f, 1.1f * a / 448.0f)) &
        0xffff0000u);
  memory_.upload(scale.data(), s.data(), scales * 4);
  TensorView v = codes.view(DType::F8_E4M3, shape);
  v.scales = static_cast<const float*>(scale.data());
  memory_.arrange_fp8_codes(v);  // the order this memory's matmuls read
  return v;
}

}  // namespace specserve
