#pragma once
// Which rows the next target forward computes (the scheduler's decision for one step), as a pure
// function of the running sequences so it can be tested without a model.
//
// Policy: every decoding sequence contributes its decode row (or its verify rows [pending,
// d1..dγ]) — they are latency-critical and few. Prefilling sequences then contribute their next
// prompt chunk, oldest first, while the row budget lasts; a chunk that does not fit waits for a
// later step whole (never shortened), so chunk boundaries depend only on the sequence.
//
// Chunk boundaries (prefill_chunk_end). A chunk starts where the prompt's computed part ends: at 0, at
// the end of the previous chunk, or at a prefix-cache hit (docs/DESIGN.md §5: a multiple of 16, and of
// 64 on a hybrid target). It ends at the first of: the next multiple of the chunk length C, the
// sequence's next DeltaNet snapshot point (a multiple of stop_interval, last_stop, or branch_stop: the last
// 64-grid point of the blocks its prompt shares with cached ones, past its hit; hybrid targets with the
// prefix cache on: the state is copied there, between steps), and the prompt's end. Every
// boundary but the prompt's end and a dense target's hit lies on the 64-position grid, so the chunked
// DeltaNet sees the chunks of a whole-prompt prefill (docs/DESIGN.md §1.2), and none depends on the batch.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine_options.h"

namespace specserve::engine {

struct SeqPlanInput {
  int64_t prompt_len = 0;
  int64_t prefilled = 0;      // prompt tokens already in the model (a multiple of the chunk, or all)
  int drafts = 0;             // draft tokens ready for a verify (decoding sequences)
  int64_t stop_interval = 0;  // chunks also end at its multiples (0: none)
  int64_t last_stop = 0;      // ... and here (0: nowhere): the prompt's last 64-grid point, from 256 on
  int64_t branch_stop = 0;    // ... and here (0: nowhere): where its prompt leaves the cached blocks
  int64_t waited = 0;         // prefilling: consecutive steps it had a chunk to run and got none
};

// Where the prefill chunk of `q` starting at q.prefilled ends (see above), for chunk length `chunk`.
int64_t prefill_chunk_end(const SeqPlanInput& q, int64_t chunk);

enum class SpanKind { PrefillChunk, Decode };

struct PlannedSpan {
  size_t seq = 0;  // index into the input
  SpanKind kind = SpanKind::Decode;
  int64_t begin = 0, end = 0;  // prompt range of a prefill chunk
  bool final_chunk = false;    // the prompt's last chunk: its last row's logits give the first token
  int64_t rows = 0;
};

// The prefill hold (EngineOptions::prefill_hold_steps, prefill_hold_rows). A prefill run streams every weight
// once, and a short one does it with too few tiles to fill the GPU (a 128-row run of the 8B's q/o projection is 16
// tiles of 128 x 256 on 132 multiprocessors), so short prompts arriving one at a time each pay a run of about the
// same time as several together. With hold_steps > 0 a step that has decode rows plans no prefill chunk while
// (1) the chunks it would plan come to fewer than hold_rows rows, (2) none of their sequences has waited
// hold_steps steps, and (3) `arrivals` (ArrivalRate: the share of recent steps that admitted a prompt) × the steps
// the longest-waiting of them has left is at least one: another prompt is expected to join before the hold runs out. A
// step without decode rows never holds (its prefill run is the step). Chunks are held whole, so their boundaries and
// bits do not change.
bool hold_prefill(std::span<const SeqPlanInput> seqs, std::span<const PlannedSpan> plan, int hold_steps,
                  int64_t hold_rows, double arrivals);

// The prefill hold's arrival rate: the share of recent steps that admitted a prompt, an exponential average over
// about kSteps steps. It counts steps, not prompts: prompts admitted in one step are one arrival for the question the
// hold asks (will another prompt join within the steps left?). A closed loop's clients whose requests end in the same
// step send their next ones together; the engine admits most in one step and the stragglers in the next. Counted as
// prompts (12 in a step: 0.75 a step for a while) that burst predicted followers that never came, and the stragglers
// were held for the whole hold and then trailed their wave by as many steps, where a few sequences decoded alone
// (the 27B over HTTP at 16 clients, τ 1: 0.96-0.98x plain, docs/DECISIONS.md §5). Prompts arriving one a step, the
// case the hold is for, read the same either way.
class ArrivalRate {
 public:
  static constexpr double kSteps = 16;
  void note_step(int64_t admitted) { rate_ += ((admitted > 0 ? 1.0 : 0.0) - rate_) / kSteps; }
  double per_step() const { return rate_; }

 private:
  double rate_ = 0;
};

// The step's spans; with hold_prefill true for them, without its prefill chunks (*held then set, if given).
std::vector<PlannedSpan> plan_step(std::span<const SeqPlanInput> seqs, const EngineOptions& options,
                                   double arrivals = 0, bool* held = nullptr);

}  // namespace specserve::engine
