#pragma once
// The speculation part of `specserve generate --json` (issue 5), kept next to the records it
// formats so the CLI only calls it:
//   "stats": {..., "steps": n, "accepted_total": n, "tau": x, "accept_rate_per_position": [x, ...]}
//   with --trace, also "steps": [{"pos": p, "drafts": [...], "accepted": a, "emitted": [...]}, ...]
// where pos is the absolute position of the step's pending token.
#include <nlohmann/json.hpp>

#include <span>

#include "engine/spec_step.h"

namespace specserve::spec {

// Adds the stats to root["stats"] (created if missing) and, when `trace`, the records as root["steps"].
void add_spec_json(std::span<const engine::SpecStep> steps, bool trace, nlohmann::ordered_json& root);

}  // namespace specserve::spec
