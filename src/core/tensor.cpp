#include "core/tensor.h"

#include <cstring>

#include "core/error.h"

namespace specserve {

Shape::Shape(std::initializer_list<int64_t> d) {
  for (int64_t x : d) push_back(x);
}

void Shape::push_back(int64_t d) {
  SS_CHECK(ndim < kMaxDims, "tensor rank above the supported maximum of {}", kMaxDims);
  SS_CHECK(d >= 0, "negative dimension {}", d);
  dims[ndim++] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

TensorView TensorView::contiguous(void* data, DType dtype, const Shape& shape, Device device) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.shape = shape;
  int64_t stride = 1;
  for (int i = shape.ndim - 1; i >= 0; --i) {
    v.strides[i] = stride;
    stride *= shape.dims[i];
  }
  return v;
}

bool TensorView::is_contiguous() const {
  int64_t stride = 1;
  for (int i = shape.ndim - 1; i >= 0; --i) {
    if (shape.dims[i] != 1 && strides[i] != stride) return false;
    stride *= shape.dims[i];
  }
  return true;
}

TensorView TensorView::rows(int64_t begin, int64_t end) const {
  SS_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= dim(0), "rows [{}, {}) out of range for {}", begin, end,
           describe());
  TensorView v = *this;
  v.shape.dims[0] = end - begin;
  v.data = static_cast<char*>(data) + begin * strides[0] * static_cast<int64_t>(dtype_size(dtype));
  if (block_scaled()) {
    // The slice's row r keeps its scale row (begin + r) / 128 as r / 128 of the moved grid: the slice starts on a
    // block, or lies inside one.
    SS_CHECK(keeps_fp8_blocks(begin, end),
             "rows [{}, {}) of block-scaled {} neither start on a 128-row block nor lie inside one", begin, end,
             describe());
    v.scales = scales + begin / kFp8BlockSize * scale_shape()[1];
  }
  return v;
}

Shape TensorView::scale_shape() const {
  if (!block_scaled()) return Shape{};
  SS_CHECK(ndim() == 2, "block-scaled {} is not a matrix", describe());
  return Shape({(dim(0) + kFp8BlockSize - 1) / kFp8BlockSize, (dim(1) + kFp8BlockSize - 1) / kFp8BlockSize});
}

TensorView TensorView::operator[](int64_t i) const {
  SS_CHECK(ndim() >= 1 && i >= 0 && i < dim(0), "index {} out of range for {}", i, describe());
  TensorView v;
  v.dtype = dtype;
  v.device = device;
  v.data = static_cast<char*>(data) + i * strides[0] * static_cast<int64_t>(dtype_size(dtype));
  for (int d = 1; d < ndim(); ++d) {
    v.shape.push_back(shape.dims[d]);
    v.strides[d - 1] = strides[d];
  }
  return v;
}

TensorView TensorView::reshape(const Shape& s) const {
  SS_CHECK(is_contiguous(), "reshape of a non-contiguous view {}", describe());
  SS_CHECK(s.numel() == numel(), "reshape {} to {}: element counts differ", describe(), s.to_string());
  return contiguous(data, dtype, s, device);
}

std::string TensorView::describe() const {
  return std::string(dtype_name(dtype)) + shape.to_string() + (block_scaled() ? " (128x128 block scales)" : "");
}

Tensor Tensor::empty(DType dtype, const Shape& shape) {
  Tensor t;
  t.buffer_ = AlignedBuffer(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  t.view_ = TensorView::contiguous(t.buffer_.data(), dtype, shape);
  return t;
}

Tensor Tensor::zeros(DType dtype, const Shape& shape) {
  Tensor t = empty(dtype, shape);
  if (t.nbytes()) std::memset(t.buffer_.data(), 0, t.nbytes());
  return t;
}

Tensor to_f32(const TensorView& v) {
  SS_CHECK(v.device == Device::CPU && v.is_contiguous(), "to_f32 needs a contiguous host view, got {}", v.describe());
  Tensor t = Tensor::empty(DType::F32, v.shape);
  convert_to_f32(v.data, v.dtype, t.as<float>(), static_cast<size_t>(v.numel()));
  return t;
}

Tensor from_f32(const TensorView& v, DType dtype) {
  SS_CHECK(v.dtype == DType::F32 && v.is_contiguous(), "from_f32 needs a contiguous F32 view, got {}", v.describe());
  Tensor t = Tensor::empty(dtype, v.shape);
  convert_from_f32(v.as<const float>(), dtype, t.as<void>(), static_cast<size_t>(v.numel()));
  return t;
}

}  // namespace specserve
