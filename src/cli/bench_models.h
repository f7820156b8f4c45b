#pragma once
// The target and drafter a benchmark mode measures (`bench steps`, `bench controlled`): a synthetic shape
// (random weights made on the device, with its z-lab drafter shape) or a checkpoint with an optional
// drafter, the drafter's forward flags applied (--draft-matmul, --draft-vocab).
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

// Exactly one of `synthetic` and `model`; `who` prefixes the messages ("bench", "bench controlled").
BenchModels load_bench_models(const std::string& synthetic, const std::string& model, const DrafterFlags& drafter,
                              const LoadOptions& lo, const char* who);

}  // namespace specserve::cli
