#include "cli/bench_models.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/common_flags.h"
#include "core/error.h"
#include "model/synthetic_shapes.h"
#include "tokenizer/tokenizer.h"

namespace specserve::cli {

void add_bench_model_flags(CLI::App& cmd, BenchModelFlags& f) {
  cmd.add_option("--synthetic", f.synthetic,
                 "A real model shape with random weights made on the device: qwen3-8b, qwen3.6-27b "
                 "(= qwen3.5-27b) or tiny, with its z-lab drafter shape; NAME-fp8 (qwen3-8b-fp8, ...) is the "
                 "target as Qwen's fp8 release with its Linear weights kept fp8 (--fp8-weights keep)");
  add_model_flag(cmd, f.model);
  add_drafter_flags(cmd, f.drafter, DrafterScope::Forward);
  add_backend_flag(cmd, f.backend);
  add_threads_flag(cmd, f.threads);
  add_dtype_flag(cmd, f.dtype);
  add_kv_dtype_flag(cmd, f.kv_dtype);
  add_fp8_weights_flag(cmd, f.fp8_weights);
  add_tensor_parallel_flag(cmd, f.tensor_parallel, f.nccl_library);
}

BenchModels load_bench_models(const BenchModelFlags& f, const char* who) {
  const std::string& synthetic = f.synthetic;
  const std::string& model = f.model;
  const DrafterFlags& drafter = f.drafter;
  if (!model.empty()) drafter.check_needs_draft();
  LoadOptions lo;
  lo.dtype = f.dtype;
  lo.kv_dtype = f.kv_dtype;
  lo.fp8_weights = f.fp8_weights;
  lo.threads = f.threads;
  lo.backend = f.backend;
  lo.tensor_parallel = tensor_parallel_load_option(f.tensor_parallel);
  lo.nccl_library = f.nccl_library;
  SS_CHECK(synthetic.empty() != model.empty(), "{}: give exactly one of --synthetic SHAPE or --model DIR", who);
  SS_CHECK(synthetic.empty() || drafter.draft.empty(), "--synthetic brings its own drafter shape; drop --draft");
  BenchModels m;
  if (!synthetic.empty()) {
    const SyntheticShape shape = synthetic_shape(synthetic);
    std::fprintf(stderr, "%s: making synthetic %s weights\n", who, shape.name.c_str());
    m.target = TargetModel::synthetic(shape.target, lo);
    m.drafter = spec::DFlashDrafter::synthetic(shape.drafter, *m.target);
    m.label = "synthetic " + shape.name;
  } else {
    m.target = TargetModel::load(model, lo);
    if (!drafter.draft.empty()) m.drafter = spec::DFlashDrafter::load(drafter.draft, *m.target, lo.dtype);
    m.label = model;
  }
  if (m.drafter) {
    m.drafter->set_matmul_order(spec::parse_draft_matmul(drafter.draft_matmul));
    if (drafter.draft_vocab != "all") {
      // The EOS ids join; a checkpoint with a tokenizer adds its added tokens.
      std::optional<tokenizer::Tokenizer> tok;
      if (!model.empty() && std::filesystem::exists(std::filesystem::path(model) / "tokenizer.json"))
        tok = tokenizer::Tokenizer::load(model);
      m.drafter->select_vocabulary(drafter.draft_vocab, tok ? &*tok : nullptr);
    }
  }
  return m;
}

}  // namespace specserve::cli
