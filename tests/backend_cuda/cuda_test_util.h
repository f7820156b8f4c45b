#pragma once
// Helpers for the CUDA-vs-CPU op tests: random inputs, device copies, NaN-poisoned outputs, error
// metrics, and the GPU fixture that skips on machines without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "core/error.h"

namespace specserve::cuda_test {

using cuda::DeviceBuffer;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  }
};

// Normal(0, scale) values; never all zero.
inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  convert_from_f32(v.data(), DType::BF16, b.data(), v.size());
  return b;
}

inline TensorView host_view(const void* p, DType t, Shape s) {
  return TensorView::contiguous(const_cast<void*>(p), t, s, Device::CPU);
}
inline TensorView dev_view(const DeviceBuffer& b, DType t, Shape s) {
  return TensorView::contiguous(b.data(), t, s, Device::CUDA);
}

// A device output buffer of n floats filled with NaN, so elements a kernel fails to write show.
inline DeviceBuffer poisoned(size_t n) {
  DeviceBuffer b(n * 4);
  b.fill_f32(NAN);
  return b;
}

inline std::vector<float> download(const DeviceBuffer& b, size_t n) { return b.to_vector<float>(n); }

// max |a - b| / max |b| (b the reference); +inf when `a` holds a NaN or inf.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

inline bool bit_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * 4) == 0; }

}  // namespace specserve::cuda_test
