#pragma once
// Small helpers the sampling tests share.
#include <limits>

#include "sampling/sampling_params.h"

namespace specserve::sampling {
inline constexpr float kInf = std::numeric_limits<float>::infinity();

inline RequestParams greedy() {
  RequestParams p;
  p.sampling.temperature = 0.0f;
  return p;
}
}  // namespace specserve::sampling
