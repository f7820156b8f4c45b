#pragma once
// Speculation statistics of one request, from its per-step records (engine/spec_step.h), with the
// names `specserve generate --json` reports.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec_step.h"

namespace specserve::spec {

struct SpecStats {
  int64_t steps = 0;           // decode / verify steps after the first token
  int64_t accepted_total = 0;  // drafts accepted over all steps
  double tau = 0.0;            // mean tokens committed per step: mean(accepted + 1); 0 without steps
  // [i]: of the steps that proposed a draft at index i, the fraction that accepted it.
  std::vector<double> accept_rate_per_position;
};

SpecStats spec_stats(std::span<const engine::SpecStep> steps);

}  // namespace specserve::spec
