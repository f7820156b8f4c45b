#pragma once
// Stage 3 of the step (engine/step.cpp): the scheduler's planned spans laid out as the rows of one
// target forward. A prefill chunk's rows are its prompt tokens (committed by the forward itself); a
// decoding sequence's rows are [pending] (decode) or [pending, d1..dk] (verify), kept or rolled back by
// the commit after acceptance. Each sequence's picker (engine/row_picker.h) is chosen here, once, and
// tells the forward whether the sequence's logits rows may be reduced to argmaxes on the device.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/batch_plan.h"
#include "engine/draft_proposer.h"
#include "engine/row_picker.h"
#include "engine/sequence.h"
#include "model/target_model.h"

namespace specserve::engine {

// One planned span, laid out.
struct SpanRows {
  Sequence* seq = nullptr;
  PlannedSpan plan;
  Picker picker = Picker::SamplingPipeline;
  std::vector<int32_t> tokens;  // the rows' input tokens (ForwardBatch span i views them)
};

struct StepRows {
  std::vector<SpanRows> spans;  // in plan order; spans[i] is batch.spans[i]
  ForwardBatch batch;
  int64_t total_rows() const;
};

// `running` is what the plan indexes; `proposer` (may be null) says which target layers to capture
// and where to leave them.
StepRows lay_out_rows(std::span<const PlannedSpan> plan, std::span<const std::unique_ptr<Sequence>> running,
                      const DraftProposer* proposer, VerifyMode verify_mode);

}  // namespace specserve::engine
