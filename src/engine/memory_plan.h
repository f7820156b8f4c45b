#pragma once
// Start-up sizing of the serving memory (`specserve serve`): the KV budget in blocks and, on a GPU with
// --max-seqs 0 (the default there), how many sequences run at once. Everything a running sequence costs
// is counted, the target's and the drafter's together:
//   - a budget block (engine/kv_budget.h) = 16 positions of the target's KV cache + the drafter's;
//   - a sequence's fixed state = its DeltaNet state slot (recurrent state, work state, conv window and
//     the presized extend rows of every DeltaNet layer) + the drafter context's waiting rows (fewer
//     than DFlashProposerOptions::max_waiting_rows between steps);
//   - its rows of one forward = γ + 1 decode / verify rows of activations (logits, captured features).
//
// The GPU rule (max_seqs = 0): after the weights, keep 1 GiB + 5 % of the free memory for activations
// and the allocator; a typical sequence is kTypicalSequencePositions positions (a ~1,500-word prompt
// and its answer); then
//     max_seqs  = usable / (fixed state + rows + KV blocks of a typical sequence), within [1, 1024]
//     kv_blocks = (usable − max_seqs × (fixed state + rows)) / budget block bytes
// so the KV pool holds max_seqs typical sequences, and longer ones take blocks on demand (fewer then
// run at once; preemption by swap covers the rest: engine/swap.h). On the 8B shape on an H200 this is
// several hundred sequences. --kv-cache-mib fixes the KV budget instead; --max-seqs N fixes N.
// On the host (CPU backend) max_seqs = 0 means 16, and the KV budget is max_seqs full contexts capped
// at a quarter of the RAM, as before.
#include <cstddef>
#include <cstdint>
#include <string>

namespace specserve::engine {

inline constexpr int64_t kTypicalSequencePositions = 2048;
inline constexpr int kMaxAutoSequences = 1024;
inline constexpr int kHostDefaultSequences = 16;

struct MemoryCosts {
  size_t block_bytes = 0;     // one budget block: target + drafter KV of 16 positions
  size_t sequence_bytes = 0;  // a sequence's fixed state: DeltaNet slot + drafter waiting rows
  size_t row_bytes = 0;       // activations of one forward row
  int rows_per_sequence = 1;  // its decode / verify rows per step (γ + 1)
  bool on_device = false;
  size_t available_bytes = 0;     // device: free after the weights; host: physical RAM
  int64_t context_positions = 0;  // the model's context length (0: unknown)
};

struct MemoryPlan {
  int64_t kv_blocks = 0;
  int max_seqs = 0;
  std::string rule;  // how they were chosen, for the start-up log
};

// `max_seqs` 0 = auto; `kv_cache_mib` 0 = auto. Throws a one-line Error when the device memory left
// after the weights cannot hold one sequence's state, a KV block and the activations headroom.
MemoryPlan plan_memory(const MemoryCosts& costs, int max_seqs, int64_t kv_cache_mib);

}  // namespace specserve::engine
