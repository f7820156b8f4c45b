#include "cli/bench_models.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "model/synthetic_shapes.h"
#include "tokenizer/tokenizer.h"

namespace specserve::cli {

BenchModels load_bench_models(const std::string& synthetic, const std::string& model, const DrafterFlags& drafter,
                              const LoadOptions& lo, const char* who) {
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
