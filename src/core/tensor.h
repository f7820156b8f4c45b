#pragma once
// Tensor views (non-owning: shape, strides in elements, dtype, device) and an owning host Tensor.
// Weights from a mmap'd safetensors file are views; activations and caches are owned Tensors.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/aligned_buffer.h"
#include "core/dtype.h"

namespace specserve {

enum class Device : uint8_t { CPU, CUDA };

inline constexpr int kMaxDims = 6;

// Rows and columns of weight one scale of a block-scaled fp8 matrix covers (Qwen's block-128 format,
// io/fp8_blocks.h).
inline constexpr int64_t kFp8BlockSize = 128;
// Whether rows or columns [begin, end) of a block-scaled fp8 matrix keep whole scale blocks: they start on a
// 128 block or lie inside one, so the slice's scale grid is a range of the matrix's.
constexpr bool keeps_fp8_blocks(int64_t begin, int64_t end) {
  return begin % kFp8BlockSize == 0 || end <= (begin / kFp8BlockSize + 1) * kFp8BlockSize;
}

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  template <typename It>
  static Shape from_range(It begin, It end) {
    Shape s;
    for (It it = begin; it != end; ++it) s.push_back(static_cast<int64_t>(*it));
    return s;
  }
  void push_back(int64_t d);
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const;
  std::string to_string() const;  // "[2, 3]"
  bool operator==(const Shape& o) const;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  Shape shape;
  std::array<int64_t, kMaxDims> strides{};  // in elements
  // A block-scaled fp8 matrix (dtype F8_E4M3, 2-D, rows contiguous: the `--fp8-weights keep` weights,
  // docs/MODELS.md §6.1): its f32 scales [ceil(rows / 128), ceil(cols / 128)], contiguous, on the same
  // device; element (r, c) stands for e4m3(data[r, c]) × scales[r / 128, c / 128]. Null for every other
  // tensor. rows() keeps it for row ranges that start on a block boundary (and refuses the others).
  const float* scales = nullptr;

  static TensorView contiguous(void* data, DType dtype, const Shape& shape, Device device = Device::CPU);

  int ndim() const { return shape.ndim; }
  int64_t dim(int i) const { return shape.dims[i]; }
  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  bool valid() const { return data != nullptr || numel() == 0; }
  // Block-scaled fp8 (see `scales`): the scale grid's shape and size in bytes (0 for other tensors).
  bool block_scaled() const { return scales != nullptr; }
  Shape scale_shape() const;
  size_t scale_bytes() const { return block_scaled() ? static_cast<size_t>(scale_shape().numel()) * 4 : 0; }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }

  // A view of rows [begin, end) along dimension 0. A block-scaled matrix's rows must start on a 128-row block or
  // lie inside one (so that the slice's scale grid is a row range of the matrix's).
  TensorView rows(int64_t begin, int64_t end) const;
  // A view of index i along dimension 0 (one fewer dimension).
  TensorView operator[](int64_t i) const;
  // Same data, new shape; requires contiguity and equal numel.
  TensorView reshape(const Shape& s) const;
  std::string describe() const;  // "BF16[4096, 1024]"
};

// Owning host tensor, contiguous and 64-byte aligned.
class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(DType dtype, const Shape& shape);
  static Tensor zeros(DType dtype, const Shape& shape);

  const TensorView& view() const { return view_; }
  TensorView& view() { return view_; }
  operator const TensorView&() const { return view_; }
  template <typename T>
  T* as() const {
    return view_.as<T>();
  }
  DType dtype() const { return view_.dtype; }
  const Shape& shape() const { return view_.shape; }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return view_.nbytes(); }

 private:
  AlignedBuffer buffer_;
  TensorView view_;
};

// Copies any CPU float view (any float dtype, contiguous) into a new F32 tensor.
Tensor to_f32(const TensorView& v);
// Converts a contiguous F32 tensor to `dtype` (F32, F16, BF16, F8_E4M3).
Tensor from_f32(const TensorView& v, DType dtype);

}  // namespace specserve
