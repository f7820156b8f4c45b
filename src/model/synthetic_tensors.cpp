#include "model/synthetic_tensors.h"

#include <cmath>
#include <functional>

#include "core/error.h"

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

}  // namespace specserve
