#include "io/fp8_blocks.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/printable.h"

namespace specserve {

namespace {
// The index of the first NaN code ((c & 0x7F) == 0x7F) of q[0, n), or -1. Eight codes a step: with the
// sign bits cleared, adding 1 to every byte sets a byte's top bit exactly when it was 0x7F (no carry
// leaves a byte).
int64_t first_nan_code(const uint8_t* q, int64_t n) {
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full, kOnes = 0x0101010101010101ull, kTops = 0x8080808080808080ull;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, q + i, 8);
    if ((((v & kLow7) + kOnes) & kTops) != 0) break;
  }
  for (; i < n; ++i)
    if ((q[i] & 0x7f) == 0x7f) return i;
  return -1;
}
}  // namespace

std::string fp8_scale_name(std::string_view weight_name) {
  SS_CHECK(weight_name.ends_with("weight"), "tensor {} is not a weight, so it has no fp8 scale",
           quoted_name(weight_name));
  return std::string(weight_name) + "_scale_inv";
}

Shape fp8_scale_shape(const Shape& w) {
  SS_CHECK(w.ndim == 2, "an fp8 weight is a matrix, not {}", w.to_string());
  return Shape({(w[0] + kFp8BlockSize - 1) / kFp8BlockSize, (w[1] + kFp8BlockSize - 1) / kFp8BlockSize});
}

bool is_fp8_scale_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void check_fp8_codes(const TensorView& weight, std::string_view name) {
  SS_CHECK(weight.dtype == DType::F8_E4M3 && weight.ndim() == 2, "fp8 weight {} is {}, expected a F8_E4M3 matrix",
           quoted_name(name), weight.describe());
  SS_CHECK(weight.is_contiguous(), "fp8 weight {}: tensors must be contiguous", quoted_name(name));
  const int64_t rows = weight.dim(0), cols = weight.dim(1);
  const auto* q = weight.as<const uint8_t>();
  std::atomic<int64_t> first{rows * cols};
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    const int64_t i = first_nan_code(q + begin * cols, (end - begin) * cols);
    if (i < 0) return;
    int64_t seen = first.load();
    while (begin * cols + i < seen && !first.compare_exchange_weak(seen, begin * cols + i)) {
    }
  });
  const int64_t at = first.load();
  SS_CHECK(at == rows * cols,
           "fp8 weight {} holds the e4m3 NaN code 0x{:02X} at row {}, column {}: the NaN codes 0x7F and 0xFF are no "
           "weight value (a quantiser saturates at ±448), so the checkpoint is damaged",
           quoted_name(name), at < rows * cols ? q[at] : 0, at / (cols > 0 ? cols : 1), at % (cols > 0 ? cols : 1));
}

Tensor dequantize_fp8_blocks(const TensorView& weight, const TensorView& scale, DType out, std::string_view name) {
  SS_CHECK(weight.dtype == DType::F8_E4M3 && weight.ndim() == 2, "fp8 weight {} is {}, expected a F8_E4M3 matrix",
           quoted_name(name), weight.describe());
  SS_CHECK(weight.is_contiguous() && scale.is_contiguous(), "fp8 weight {}: tensors must be contiguous",
           quoted_name(name));
  const Shape want = fp8_scale_shape(weight.shape);
  SS_CHECK(scale.shape == want, "the scale of fp8 weight {} {} has shape {}; 128×128 blocks need {}", quoted_name(name),
           weight.shape.to_string(), scale.shape.to_string(), want.to_string());
  SS_CHECK(is_fp8_scale_dtype(scale.dtype), "the scale of fp8 weight {} has dtype {}; scales must be F32, F16 or BF16",
           quoted_name(name), dtype_name(scale.dtype));
  SS_CHECK(out == DType::F32 || out == DType::F16 || out == DType::BF16,
           "fp8 weights dequantise to F32, F16 or BF16, not {}", dtype_name(out));
  check_fp8_codes(weight, name);
  const int64_t rows = weight.dim(0), cols = weight.dim(1), scale_cols = want[1];
  const Tensor scales = to_f32(scale);
  const float* s = scales.as<float>();
  const float* decode = e4m3_f32_table();
  const auto* q = weight.as<const uint8_t>();
  Tensor result = Tensor::empty(out, weight.shape);
  auto* dst = result.as<uint8_t>();
  const size_t out_row_bytes = static_cast<size_t>(cols) * dtype_size(out);
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      const float* block_scales = s + (r / kFp8BlockSize) * scale_cols;
      const uint8_t* codes = q + r * cols;
      for (int64_t c = 0; c < cols; ++c)
        row[static_cast<size_t>(c)] = decode[codes[c]] * block_scales[c / kFp8BlockSize];
      convert_from_f32(row.data(), out, dst + static_cast<size_t>(r) * out_row_bytes, static_cast<size_t>(cols));
    }
  });
  return result;
}

}  // namespace specserve
