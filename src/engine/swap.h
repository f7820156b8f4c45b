#pragma once
// Preemption by swap: what the engine does when a step cannot get the KV blocks it needs.
//
// The step's plan (engine/batch_plan.h) is checked against the budget (engine/kv_budget.h: every
// running sequence's blocks after the step). While it does not fit, the most recently admitted running
// sequence is swapped out and the plan is made again without it. Swapping out moves everything the
// sequence holds on the device to host memory (Memory::allocate_host: pinned on a GPU, counted against
// --swap-space-gib): the target's KV blocks covering its committed positions, every DeltaNet layer's
// recurrent state and conv window, the drafter context's K/V blocks and waiting rows
// (SequenceState::swap_out, DraftContext::swap_out); its device blocks and buffers are freed. The
// Sequence object itself — sampler state and RNG, token history, stop checker, pending token, the
// drafts proposed for its next verify and their distributions, the output stream — stays in host
// memory untouched.
//
// A swapped-out sequence is never recomputed through prefill (its decoded positions would get prefill
// kernels' bits: docs/DESIGN.md §1). It comes back, oldest first and before any new request is
// admitted, once the blocks of its next step and the admission headroom are free and a state slot is:
// new blocks (a new block table) and buffers, the bytes copied back bit for bit, and it continues
// exactly where it stopped, so its tokens are those of an uninterrupted run. kv_budget.h says why the
// newest running sequence can always be swapped out (the swap space's reservation at admission) and why
// the oldest always progresses; a request the swap space cannot cover waits in the queue.
//
// Metrics (engine/metrics.h): preemptions, swapped sequences, bytes swapped each way, swap space used.
// The Engine member functions that do this are in engine/swap.cpp.
