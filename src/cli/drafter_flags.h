#pragma once
// The DFlash drafter's command-line flags, registered once for every command that loads a drafter
// (`generate`, `serve`, `bench serve-load`, `bench steps`), with one name, one default and one help
// text each. A command asks for the scope it can honour: `bench steps` times forwards, so only the
// flags that change the drafter's forward apply there.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace specserve::server {
struct ServeSpec;
}

namespace specserve::cli {

enum class DrafterScope {
  Forward,   // --draft, --draft-matmul, --draft-vocab (bench steps)
  Generate,  // Forward + --gamma, --draft-sampling, --verify-mode (generate)
  Serving,   // Generate + --draft-policy, --step-cost-profile, --spec-max-batch (serve, bench serve-load)
};

struct DrafterFlags {
  std::string draft;  // drafter directory; "" = plain decoding
  int gamma = 0;      // drafts per verify; 0 = the drafter's block size - 1
  std::string draft_sampling = "argmax";
  std::string draft_matmul = "fast";
  std::string draft_vocab = "all";
  std::string verify_mode = "sample-match";
  int spec_max_batch = 0;                 // 0 = speculate at any batch
  std::string draft_policy = "adaptive";  // Serving scope; the other scopes draft gamma (fixed)
  std::string step_cost_profile;          // "" = calibrate at start-up

  // The drafter-only flags the user gave (their long names), filled by add_drafter_flags.
  std::vector<const CLI::Option*> given_options;

  // Throws Error when a drafter-only flag was given without --draft, naming the flags.
  void check_needs_draft() const;
  // The parsed values into a serving spec (draft_dir, draft_sampling, draft_matmul, draft_vocab,
  // engine.gamma, engine.verify_mode, engine.spec_max_batch, engine.draft_policy with the step_costs
  // hook: cli/step_cost_calibration.h). Throws Error on a bad value.
  void apply_to(server::ServeSpec& spec) const;
};

// Registers the flags of `scope` on `cmd`, bound to `flags` (which must outlive the parse).
void add_drafter_flags(CLI::App& cmd, DrafterFlags& flags, DrafterScope scope);

}  // namespace specserve::cli
