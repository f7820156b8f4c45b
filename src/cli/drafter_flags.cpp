#include "cli/drafter_flags.h"

#include "cli/step_cost_calibration.h"
#include "core/error.h"
#include "engine/acceptance.h"
#include "server/loaded_model.h"
#include "spec/dflash_drafter.h"
#include "spec/draft_selection.h"
#include "spec/draft_vocabulary.h"

namespace specserve::cli {

void add_drafter_flags(CLI::App& cmd, DrafterFlags& f, DrafterScope scope) {
  auto keep = [&f](CLI::Option* o) {
    f.given_options.push_back(o);
    return o;
  };
  cmd.add_option("--draft", f.draft,
                 "DFlash drafter directory (speculative decoding; the output is the same as without)");
  keep(cmd.add_option("--draft-matmul", f.draft_matmul, spec::kDraftMatmulHelp)
           ->check(CLI::IsMember({"fast", "exact"}))
           ->capture_default_str());
  keep(cmd.add_option("--draft-vocab", f.draft_vocab, spec::kDraftVocabHelp)->capture_default_str());
  if (scope == DrafterScope::Forward) return;
  keep(cmd.add_option("--gamma", f.gamma,
                      "Drafts per verify step, 1..block_size-1 (0 = block_size - 1); with --draft-policy adaptive "
                      "the most a sequence drafts")
           ->check(CLI::NonNegativeNumber)
           ->capture_default_str());
  keep(cmd.add_option("--draft-sampling", f.draft_sampling,
                      "argmax (point-mass drafts: bit-identical to plain decoding) or sample (drafts sampled from the "
                      "drafter, min(1,p/q) acceptance: the same distribution, not the same tokens)")
           ->check(CLI::IsMember({"argmax", "sample"}))
           ->capture_default_str());
  keep(cmd.add_option("--verify-mode", f.verify_mode,
                      "sample-match (lossless) or raw-argmax (raw drafter argmax vs raw target argmax, penalties and "
                      "temperature ignored for speculated tokens; NOT lossless, for comparison only)")
           ->check(CLI::IsMember({"sample-match", "raw-argmax"}))
           ->capture_default_str());
  if (scope == DrafterScope::Generate) return;
  keep(cmd.add_option("--draft-policy", f.draft_policy,
                      "adaptive (each step, each sequence drafts 0..--gamma tokens, chosen from its observed "
                      "acceptance and measured step costs to maximise tokens/s; 0 = a plain decode row) or fixed "
                      "(every sequence drafts --gamma). Outputs are the same either way")
           ->check(CLI::IsMember({"adaptive", "fixed"}))
           ->capture_default_str());
  keep(cmd.add_option("--step-cost-profile", f.step_cost_profile,
                      "Step costs for --draft-policy adaptive, as `specserve bench step-costs --out FILE` wrote "
                      "them for this model, device and build (default: timed at start-up, a few seconds; a "
                      "profile that does not match or does not parse is refused with a warning and timed instead)"));
  keep(cmd.add_option("--spec-max-batch", f.spec_max_batch,
                      "A hard cap: speculate only while at most N sequences decode; above it plain decode steps, "
                      "same outputs (0 = no cap; the adaptive policy already stops drafting where it does not pay)")
           ->check(CLI::NonNegativeNumber)
           ->capture_default_str());
}

void DrafterFlags::check_needs_draft() const {
  if (!draft.empty()) return;
  std::string given;
  int count = 0;
  for (const CLI::Option* o : given_options) {
    if (o->count() == 0) continue;
    given += (given.empty() ? "" : ", ") + o->get_name();
    ++count;
  }
  SS_CHECK(count == 0, "{} {} --draft DIR (a DFlash drafter)", given, count == 1 ? "needs" : "need");
}

void DrafterFlags::apply_to(server::ServeSpec& spec) const {
  spec.draft_dir = draft;
  spec.draft_sampling = spec::parse_draft_sampling(draft_sampling);
  spec.draft_matmul = spec::parse_draft_matmul(draft_matmul);
  spec.draft_vocab = draft_vocab;
  spec.engine.gamma = gamma;
  spec.engine.verify_mode = engine::parse_verify_mode(verify_mode);
  spec.engine.spec_max_batch = spec_max_batch;
  spec.engine.draft_policy = draft.empty() ? engine::DraftPolicy::Fixed : engine::parse_draft_policy(draft_policy);
  spec.step_costs = [profile = step_cost_profile](TargetModel& target, const specserve::spec::DFlashDrafter& drafter,
                                                  const engine::EngineOptions& eo) {
    const int gamma_max = eo.gamma > 0 ? eo.gamma : drafter.block_size() - 1;
    return serving_step_costs(target, drafter, eo.max_seqs, gamma_max, eo.kv_blocks, eo.prefill_chunk, profile);
  };
}

}  // namespace specserve::cli
