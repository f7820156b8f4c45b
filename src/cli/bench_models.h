#pragma once
// The target and drafter a benchmark mode measures (`bench steps`, `bench controlled`, `bench step-costs`): a synthetic
// shape (random weights made on the device, with its z-lab drafter shape) or a checkpoint with an optional drafter, the
// drafter's forward flags applied (--draft-matmul, --draft-vocab).
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "cli/drafter_flags.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

struct BenchModels {
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<spec::DFlashDrafter> drafter;  // null: a checkpoint given without --draft
  std::string label;                             // "synthetic SHAPE" or the checkpoint's directory
};

// The flags that choose them, the same in every mode: --synthetic SHAPE or --model DIR (with the drafter's
// flags), --backend, --threads, --dtype, --kv-dtype, --fp8-weights, --tensor-parallel.
struct BenchModelFlags {
  std::string synthetic;
  std::string model;
  DrafterFlags drafter;
  std::string backend = "auto";
  int threads = 0;
  std::string dtype = "auto";
  std::string kv_dtype = "auto";
  std::string fp8_weights = "dequantise";
  int tensor_parallel = 1;
  std::string nccl_library;
};
void add_bench_model_flags(CLI::App& cmd, BenchModelFlags& f);

// Exactly one of --synthetic and --model; `who` prefixes the messages ("bench steps", "bench controlled").
BenchModels load_bench_models(const BenchModelFlags& f, const char* who);

}  // namespace specserve::cli
