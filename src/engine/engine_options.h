#pragma once
// Engine capacity and batching knobs (from `specserve serve` flags).
#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/acceptance.h"
#include "io/step_cost_profile.h"

namespace specserve::engine {

// How many drafts each speculating sequence's verify carries (docs/DFLASH.md §13).
//   Fixed: every sequence drafts gamma (fewer near max_tokens), as the drafter's block allows.
//   Adaptive: per sequence and step, γ_i in 0..gamma chosen from its observed acceptance and the step cost
//     model to maximise expected tokens per second (engine/draft_length_policy.h); γ_i = 0 is a plain
//     decode row, and when no sequence drafts the drafter does not run.
enum class DraftPolicy { Fixed, Adaptive };
std::string_view draft_policy_name(DraftPolicy p);      // "fixed", "adaptive"
DraftPolicy parse_draft_policy(std::string_view name);  // throws Error naming the accepted values

struct EngineOptions {
  // Sequences running at once: each holds a DeltaNet state slot and its KV blocks (taken on demand,
  // engine/kv_budget.h). `specserve serve` sizes it from memory (engine/memory_plan.h).
  int max_seqs = 16;
  int max_queue = 256;        // requests waiting for admission; more are refused (503)
  int max_batch_rows = 2560;  // rows of one target forward (prefill chunks + decode + verify rows)
  // Prefill chunk length. Chunk k of a prompt is always [k·C, (k+1)·C): boundaries depend only
  // on the sequence, never on what else is in the batch (docs/DESIGN.md §1.2). A multiple of 64 so the
  // DeltaNet chunked form sees the same chunks as a whole-prompt prefill. 2,048 rows keep the prefill
  // GEMM's 128 x 256 tiles in whole waves on an H200 (at 256 rows an 8B q/o projection fills a quarter of
  // the multiprocessors: docs/DECISIONS.md §2).
  int prefill_chunk = 2048;
  // Prefill hold (--prefill-hold-steps, --prefill-hold-rows; engine/batch_plan.h, hold_prefill): while
  // sequences decode, a step whose prefill chunks come to fewer than prefill_hold_rows rows plans none of them,
  // for at most prefill_hold_steps steps a prompt, when the recent admissions predict another prompt within the
  // steps left — so that short prompts arriving one at a time share one prefill run. 0 steps: off. Bits never
  // change: a prompt's chunks and their bits do not depend on when they run (docs/DESIGN.md §1.2). 4 steps and
  // 1,024 rows: the 8B over HTTP at 64 clients, τ 3, 0.95 -> 1.05x plain; 16 clients, τ 6.5, 1.81 -> 1.99x;
  // plain throughput unchanged (docs/DECISIONS.md §6).
  int prefill_hold_steps = 4;
  int prefill_hold_rows = 1024;
  int64_t kv_blocks = 0;  // KV-cache budget in blocks of 16 positions, target + drafter (set by the loader)
  // Host memory for swapped-out sequences (engine/swap.h; pinned on a GPU), --swap-space-gib. 0: no
  // preemption, every admitted sequence's worst case fits the KV budget.
  size_t swap_space_bytes = size_t{4} << 30;
  int gamma = 0;  // drafts per verify (0: no speculation); the adaptive policy's upper bound
  DraftPolicy draft_policy = DraftPolicy::Fixed;
  // The step cost model's coefficients; required by DraftPolicy::Adaptive (engine/step_cost_model.h).
  std::optional<StepCosts> step_costs;
  // Whether the adaptive policy also corrects the model by its steps' measured times (StepCostCorrection,
  // engine/draft_length_policy.h). Off only where the costs are a scripted table rather than this
  // device's (tests), so that the policy's choices do not depend on the test machine's clock.
  bool step_cost_feedback = true;
  // A hard cap: speculate only while at most this many sequences decode (0: no cap). Above it the engine
  // proposes no drafts and the next step is a plain decode whatever the policy says; outputs are the same
  // either way (drafts never change them). The adaptive policy makes the choice from measured costs; the
  // cap remains for a fixed policy and as an operator's override.
  int spec_max_batch = 0;
  // How drafts are judged (engine/acceptance.h); raw-argmax is NOT lossless (comparison only).
  VerifyMode verify_mode = VerifyMode::SampleMatch;
  // Prefix cache (docs/DESIGN.md §5; --no-prefix-cache turns it off): prompt KV blocks computed by prefill
  // are shared between requests. On hybrid targets the DeltaNet state is kept at every multiple of
  // prefix_cache_state_interval prompt positions (--prefix-cache-state-interval, a multiple of 64; the
  // default from the table in docs/DESIGN.md §5.5) and at each prompt's last multiple of 64 when that
  // is at least 256 (below it the extra forward costs more than re-prefilling; engine/prefix_share.cpp).
  bool prefix_cache = true;
  int prefix_cache_state_interval = 2048;
  // Token ids at or above this are lm_head padding, never sampled (the tokenizer's size; 0 = all).
  int64_t real_vocab = 0;
};

// Adjusts options so the scheduler can always make progress: the chunk is a multiple of 64 and a
// full step of decode/verify rows still leaves room for one chunk. Throws Error for an adaptive draft
// policy without step costs.
EngineOptions normalised(EngineOptions o);

}  // namespace specserve::engine
