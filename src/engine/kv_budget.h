#pragma once
// The KV budget at run time: blocks are taken as sequences grow, not reserved for their worst case.
//
// Units. A budget block pays for one block of 16 positions of the target's KV cache AND one of the
// drafter's (the start-up sizing charges both: engine/memory_plan.h), so a sequence costs
// max(target blocks, drafter blocks) (Sequence::kv_blocks). The drafter's cache runs ahead of the
// target's by its drafted block (DraftProposer::positions_past_context).
//
// Admission asks for what a request needs now: the blocks of its first prefill chunk (plus the
// drafter's lookahead), one DeltaNet state slot (EngineOptions::max_seqs slots), and a headroom of one
// block per running sequence (each may cross into a new block at its next step) — not its worst case.
// A step that cannot get the blocks it needs swaps out the most recently admitted running sequence
// (engine/swap.h) and plans again.
//
// The prefix cache (docs/DESIGN.md §5.5). Each physical block is counted once: every running sequence's
// own blocks (Sequence::kv_blocks, its shared ones excluded) plus the cache's — one per entry, held or not,
// and one per DeltaNet snapshot block. Unheld entries and all snapshots are reclaimable and are evicted
// before admission gives up, before a swapped-out sequence waits and before anyone is preempted.
//
// Why that never deadlocks, never fails and never recomputes. Take the live sequences (running and
// swapped out) in admission order and call the longest prefix whose worst cases (prompt + max_tokens +
// lookahead) fit the budget together the device-safe prefix P. A step short of blocks has a running
// sequence outside P (those in P fit at their longest), so the newest running sequence is outside P.
// Admission keeps the swap space's reservation — the worst-case image of every sequence outside P and
// the actual image of every swapped-out one inside it (swap_reservation) — within --swap-space-gib, so
// that sequence can always be swapped out. The oldest sequence is always in P (submit() refuses a
// request whose worst case exceeds the budget) and is never preempted, so it always progresses; P only
// grows as sequences finish. A request that the swap space cannot cover waits in the queue. With no
// swap space this is the old rule: every admitted sequence's worst case fits.
// With the prefix cache: a sequence's worst case counts all its positions, shared blocks included. A held
// entry is held only by running sequences (swap-out drops the references), so after evicting every
// reclaimable block the budget in use is at most the sum, over running sequences, of their own blocks and
// the entries they hold (each held entry charged to one holder), which for a sequence is at most its
// current block count and so its worst case. Snapshots are never held. So "a step short of blocks has a
// running sequence outside P" still holds, and the rest of the argument is unchanged.
#include <cstddef>
#include <cstdint>
#include <span>

namespace specserve::engine {

// Blocks of 16 positions covering `positions`.
int64_t blocks_for(int64_t positions);

// One live sequence as the budget sees it, in admission order.
struct BudgetEntry {
  int64_t worst_blocks = 0;     // blocks at its longest
  size_t worst_swap_bytes = 0;  // its swap image at its longest
  bool swapped = false;
  size_t swapped_bytes = 0;  // its image now, when swapped out
};

// The host bytes the swap space must be able to give `live` (admission order) for the proof above:
// the worst-case image of every entry outside the device-safe prefix of `total_blocks` blocks, and the
// actual image of every swapped-out entry inside it.
size_t swap_reservation(std::span<const BudgetEntry> live, int64_t total_blocks);

// Blocks kept free at admission beyond the new sequence's first chunk: one per running sequence.
inline int64_t admission_headroom(size_t running) { return static_cast<int64_t>(running); }

}  // namespace specserve::engine
