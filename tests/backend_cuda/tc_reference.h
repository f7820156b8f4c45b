#pragma once
// Shared by the tensor-core matmul tests (emulation and GPU): the contract's reference product.
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace specserve::cuda_test {

// y = bf16(x) · wᵀ in double: the contract's operands (x rounded to nearest even), exact products.
inline std::vector<float> reference(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t M, int64_t N,
                                    int64_t K) {
  std::vector<float> y(size_t(M * N));
  std::vector<double> xr(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) xr[size_t(k)] = bf16_to_f32(f32_to_bf16(x[m * ldx + k]));
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += xr[size_t(k)] * double(bf16_to_f32(w[n * ldw + k]));
      y[size_t(m * N + n)] = float(s);
    }
  }
  return y;
}

}  // namespace specserve::cuda_test
