#pragma once
// Which rows the next target forward computes (the scheduler's decision for one step), as a pure
// function of the running sequences so it can be tested without a model.
//
// Policy: every decoding sequence contributes its decode row (or its verify rows [pending,
// d1..dγ]) — they are latency-critical and few. Prefilling sequences then contribute their next
// prompt chunk, oldest first, while the row budget lasts; a chunk that does not fit waits for a
// later step whole (never shortened), so chunk boundaries depend only on the sequence.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine_options.h"

namespace specserve::engine {

struct SeqPlanInput {
  int64_t prompt_len = 0;
  int64_t prefilled = 0;  // prompt tokens already in the model (a multiple of the chunk, or all)
  int drafts = 0;         // draft tokens ready for a verify (decoding sequences)
};

enum class SpanKind { PrefillChunk, Decode };

struct PlannedSpan {
  size_t seq = 0;  // index into the input
  SpanKind kind = SpanKind::Decode;
  int64_t begin = 0, end = 0;  // prompt range of a prefill chunk
  bool final_chunk = false;    // the prompt's last chunk: its last row's logits give the first token
  int64_t rows = 0;
};

std::vector<PlannedSpan> plan_step(std::span<const SeqPlanInput> seqs, const EngineOptions& options);

}  // namespace specserve::engine
