#pragma once
// Builds Qwen block-128 fp8 checkpoints from the float fixtures (tests/fixtures/model), in C++: each Linear
// weight is quantised to e4m3 with one scale per 128×128 block (amax / 448, stored in the chosen scale
// dtype), the other tensors are rounded to bf16 as the released FP8 checkpoints keep them; beside it, the
// same model with the dequantised weights stored as f32 (e4m3 value × stored scale, computed here
// element by element), which is what the fp8 checkpoint must load as.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/checkpoint_layout.h"
#include "io/fp8_blocks.h"
#include "io/safetensors.h"

namespace specserve::testing {

// A scratch directory removed at scope exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("specserve-fp8-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct QuantizedWeight {
  Tensor codes;        // F8_E4M3 [out, in]
  Tensor scale;        // scale_dtype [ceil(out/128), ceil(in/128)]
  Tensor dequantized;  // F32 [out, in]: e4m3(codes) × scale, one f32 multiply per element
};

inline QuantizedWeight quantize_fp8_blocks(const TensorView& weight, DType scale_dtype) {
  const Tensor w = to_f32(weight);
  const int64_t rows = weight.dim(0), cols = weight.dim(1);
  const Shape grid = fp8_scale_shape(weight.shape);
  Tensor amax = Tensor::zeros(DType::F32, grid);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& m = amax.as<float>()[(r / 128) * grid[1] + c / 128];
      m = std::max(m, std::fabs(w.as<float>()[r * cols + c]));
    }
  for (int64_t b = 0; b < grid.numel(); ++b) {
    float& m = amax.as<float>()[b];
    m = m > 0 ? m / 448.0f : 1.0f;
  }
  QuantizedWeight q;
  q.scale = scale_dtype == DType::F32 ? std::move(amax) : from_f32(amax, scale_dtype);
  const Tensor stored_scale = to_f32(q.scale);
  q.codes = Tensor::empty(DType::F8_E4M3, weight.shape);
  q.dequantized = Tensor::empty(DType::F32, weight.shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = stored_scale.as<float>()[(r / 128) * grid[1] + c / 128];
      const uint8_t code = f32_to_e4m3(w.as<float>()[r * cols + c] / s);
      q.codes.as<uint8_t>()[r * cols + c] = code;
      q.dequantized.as<float>()[r * cols + c] = e4m3_to_f32(code) * s;
    }
  return q;
}

// Qwen/Qwen3-8B-FP8's quantization_config.
inline nlohmann::json qwen_fp8_quantization_config() {
  return {
      {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

struct Fp8Pair {
  std::vector<std::string> quantized;  // the names of the fp8 weights
};

// From the float checkpoint in `source`: an fp8 checkpoint in `fp8_dir` (config.json with
// quantization_config, written as shards of at most `shard_bytes` when non-zero) and its dequantised f32
// twin in `dequantized_dir` (the source config). Every Linear weight is quantised, lm_head included, except
// DeltaNet's in_proj_a / in_proj_b, kept in bf16 as Qwen does; the other tensors the model reads are bf16 in
// both; tensors it does not read (vision tower, MTP head) are copied as they are.
inline Fp8Pair write_fp8_pair(const std::string& source, const std::string& fp8_dir, const std::string& dequantized_dir,
                              DType scale_dtype, uint64_t shard_bytes = 0) {
  const std::string config_text = read_text(source + "/config.json");
  const ModelConfig config = parse_model_config(config_text);
  const auto ckpt = Checkpoint::open(source, MapAdvice::Normal);
  const CheckpointLayout layout = resolve_checkpoint_layout(config, *ckpt);
  SafetensorsWriter fp8, dequantized;
  Fp8Pair out;
  for (const auto& name : ckpt->names()) {
    const TensorView v = ckpt->get(name);
    const auto expected = std::find_if(layout.tensors.begin(), layout.tensors.end(),
                                       [&](const ExpectedTensor& t) { return t.name == name; });
    if (expected == layout.tensors.end()) {
      fp8.add(name, v);
      dequantized.add(name, v);
      continue;
    }
    const bool kept =
        !expected->linear || name.find("in_proj_a") != std::string::npos || name.find("in_proj_b") != std::string::npos;
    if (kept) {
      const Tensor bf16 = from_f32(to_f32(v), DType::BF16);
      fp8.add(name, bf16);
      dequantized.add(name, bf16);
      continue;
    }
    const QuantizedWeight q = quantize_fp8_blocks(v, scale_dtype);
    fp8.add(name, q.codes);
    fp8.add(fp8_scale_name(name), q.scale);
    dequantized.add(name, q.dequantized);
    out.quantized.push_back(name);
  }
  nlohmann::json fp8_config = nlohmann::json::parse(config_text);
  (fp8_config.contains("text_config") ? fp8_config["text_config"] : fp8_config)["quantization_config"] =
      qwen_fp8_quantization_config();
  write_text(fp8_dir + "/config.json", fp8_config.dump(2));
  write_text(dequantized_dir + "/config.json", config_text);
  if (shard_bytes)
    fp8.write_sharded(fp8_dir, shard_bytes);
  else
    fp8.write(fp8_dir + "/model.safetensors");
  dequantized.write(dequantized_dir + "/model.safetensors");
  return out;
}

}  // namespace specserve::testing
