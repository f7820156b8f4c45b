#pragma once
// Weights without a checkpoint, for benchmarks on real model shapes (`specserve bench steps --synthetic`):
// every tensor asked for is allocated in one Memory (device memory for CUDA, so an 8B or 27B shape
// needs no file and no host copy) and filled there with seeded uniform values (Memory::fill_uniform)
// in ranges that keep activations finite and O(1):
//   matrices ±sqrt(3 / fan_in) (the embedding table ±1), norm weights [0.9, 1.1] (Plain) or
//   [-0.1, 0.1] (zero-centred), A_log [0, 2], dt_bias [-1, 1], conv kernels ±0.5.
// Block-scaled fp8 Linear weights (make_fp8, the synthetic `-fp8` shapes): e4m3 codes uniform in ±448 (rounded
// to e4m3) times block-128 scales uniform in [0.9, 1.1] × sqrt(3 / fan_in) / 448 and cut to bf16 values (as
// Qwen's FP8 checkpoints store them; kept as f32), so the dequantised weights have the bf16 matrices'
// magnitude.
// The values mean nothing; the shapes, dtypes and memory traffic are a real model's.
#include <cstdint>
#include <deque>
#include <string>

#include "backend/memory.h"
#include "core/tensor.h"

namespace specserve {

class SyntheticTensors {
 public:
  SyntheticTensors(const Memory& memory, uint64_t seed, bool zero_centred_norms = false)
      : memory_(memory), seed_(seed), zero_centred_norms_(zero_centred_norms) {}
  const Memory& memory() const { return memory_; }

  // A new tensor of `shape` for the checkpoint tensor `name` (its values chosen by the name's kind).
  TensorView make(const std::string& name, const Shape& shape, DType dtype);
  // A new block-scaled fp8 matrix [out, in] for the Linear weight `name`: F8_E4M3 codes with their f32 scales
  // [ceil(out/128), ceil(in/128)] (core/tensor.h TensorView::scales), as WeightStore::linear keeps a real
  // fp8 checkpoint's (docs/MODELS.md §6.1).
  TensorView make_fp8(const std::string& name, const Shape& shape);
  size_t bytes() const { return bytes_; }

 private:
  const Memory& memory_;
  uint64_t seed_;
  bool zero_centred_norms_;
  std::deque<Buffer> buffers_;
  size_t bytes_ = 0;
};

}  // namespace specserve
