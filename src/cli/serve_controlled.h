#pragma once
// The acceptance-controlled serving benchmark behind `specserve bench serve-load --acceptance` (docs/SERVER.md,
// "Benchmark"): the HTTP load of `bench serve-load` against the in-process server, with and without
// speculation, at chosen acceptances on any target (random weights included, where a drafter accepts
// nothing). Per concurrency level, every request a distinct token-id prompt drawn from the seed:
//   1. plain:      the server's engine without a drafter; the token ids each request streams back are the
//                  recording (cli/serve_recording.h);
//   2. controlled: for every acceptance profile, the engine restarted over the same target with a
//                  ControlledDraftProposer (cli/controlled_draft_proposer.h) wrapping the loaded drafter's
//                  proposer: the real drafter forward every step, drafts taken from the recording and
//                  corrupted to the profile, under the server's draft-length policy (--draft-policy).
//                  Every request's output must equal its plain output.
// Every pass starts on a fresh engine (an empty prefix cache) and runs its level twice: untimed with prompts
// of its own (the warm-up, recorded too), then timed, so the timed requests meet the engine's steady state
// (graphs captured, the draft policy warmed up) as a long-running server's do. A failed request or a
// differing output is an Error, never a number; every table line says it is acceptance-controlled.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/controlled_draft_proposer.h"
#include "cli/serve_recording.h"
#include "io/acceptance_spec.h"
#include "server/load_generator.h"
#include "server/loaded_model.h"

namespace specserve::cli {

struct ServeControlledOptions {
  std::vector<AcceptanceSpec> acceptance;
  std::vector<int> levels;            // concurrency levels
  server::LoadGeneratorOptions load;  // where the server is and the requests (random workload); prompts are set here
  uint64_t seed = 1;                  // the prompts, the requests' sampling seeds and the corruption process
  std::string label;                  // the model and drafter, for the table
  // Tests only: edits the plain pass's recording of each level's timed requests before the controlled
  // passes use it.
  std::function<void(std::vector<RecordedRequest>&)> tamper;
};

// One concurrency level at one acceptance profile.
struct ServeControlledRow {
  int concurrency = 0;
  std::string acceptance;     // AcceptanceSpec::label()
  double requested_tau = 0;   // tokens per verify with γ drafts
  server::LevelResult plain;  // the level's plain pass (the same in each of its rows)
  server::LevelResult spec;
};

struct ServeControlledResult {
  int gamma = 0;
  std::string policy;                    // the draft-length policy (engine/draft_length_policy.h)
  std::vector<ServeControlledRow> rows;  // level-major, profiles in the order given
};

// `served` must be the services the server answers with, over `model`, whose drafter is loaded. Throws
// Error on a failed request or a speculative output that differs from the plain one. Leaves the plain
// engine running.
ServeControlledResult run_serve_controlled(server::LoadedModel& model, RecordingServices& served,
                                           const ServeControlledOptions& options);
std::string format_serve_controlled(const ServeControlledResult& result, const ServeControlledOptions& options);

}  // namespace specserve::cli
