#include "engine/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/memory.h"
#include "core/error.h"
#include "engine/kv_budget.h"

namespace specserve::engine {

MemoryPlan plan_memory(const MemoryCosts& c, int max_seqs, int64_t kv_cache_mib) {
  MemoryPlan p;
  const auto block = static_cast<int64_t>(c.block_bytes);
  const auto per_seq_fixed =
      static_cast<int64_t>(c.sequence_bytes + c.row_bytes * static_cast<size_t>(std::max(1, c.rows_per_sequence)));
  const auto avail = static_cast<int64_t>(c.available_bytes);
  if (!c.on_device) {
    p.max_seqs = max_seqs > 0 ? max_seqs : kHostDefaultSequences;
    if (block <= 0) {
      p.kv_blocks = int64_t{1} << 20;  // no attention layers: positions cost nothing
    } else if (kv_cache_mib > 0) {
      p.kv_blocks = std::max<int64_t>(1, (kv_cache_mib << 20) / block);
    } else {
      const int64_t ctx = c.context_positions > 0 ? c.context_positions : 32768;
      const int64_t wanted = p.max_seqs * blocks_for(ctx);
      p.kv_blocks = std::max<int64_t>(1, avail > 0 ? std::min(wanted, avail / 4 / block) : wanted);
    }
    p.rule = fmt::format("host: {} sequences{}, KV budget {} blocks{}", p.max_seqs, max_seqs > 0 ? " (--max-seqs)" : "",
                         p.kv_blocks, kv_cache_mib > 0 ? " (--kv-cache-mib)" : " (max-seqs full contexts, <= RAM/4)");
    return p;
  }
  // Device: what is free after the weights, less the activations headroom.
  const int64_t usable = avail - (int64_t{1} << 30) - avail / 20;
  const int64_t typical = blocks_for(kTypicalSequencePositions) * std::max<int64_t>(block, 0);
  SS_CHECK(usable >= per_seq_fixed + std::max<int64_t>(block, 0),
           "only {:.2f} GiB of device memory are free after the weights: no room for one sequence's state ({:.2f} "
           "GiB), a KV cache and activations (use a smaller model)",
           gib(c.available_bytes), gib(static_cast<size_t>(per_seq_fixed)));
  const int64_t kv_fixed = kv_cache_mib > 0 && block > 0 ? (kv_cache_mib << 20) / block * block : -1;
  if (max_seqs > 0) {
    p.max_seqs = max_seqs;
  } else if (kv_fixed >= 0) {
    // The KV budget is given: as many typical sequences as it holds, within the room left for states.
    const int64_t by_kv = typical > 0 ? kv_fixed / typical : kMaxAutoSequences;
    const int64_t by_state = per_seq_fixed > 0 ? (usable - kv_fixed) / per_seq_fixed : kMaxAutoSequences;
    p.max_seqs = static_cast<int>(std::clamp<int64_t>(std::min(by_kv, by_state), 1, kMaxAutoSequences));
  } else {
    const int64_t per_typical = per_seq_fixed + typical;
    p.max_seqs = static_cast<int>(
        std::clamp<int64_t>(per_typical > 0 ? usable / per_typical : kMaxAutoSequences, 1, kMaxAutoSequences));
  }
  const int64_t states = per_seq_fixed * p.max_seqs;
  SS_CHECK(usable - states >= std::max<int64_t>(block, 0),
           "the state of {} sequences needs {:.2f} GiB of the {:.2f} GiB free after the weights: no room for a KV "
           "cache (lower --max-seqs)",
           p.max_seqs, gib(static_cast<size_t>(states)), gib(c.available_bytes));
  if (block <= 0)
    p.kv_blocks = int64_t{1} << 20;
  else if (kv_fixed >= 0)
    p.kv_blocks = std::max<int64_t>(1, std::min(kv_fixed, usable - states) / block);
  else
    p.kv_blocks = std::max<int64_t>(1, (usable - states) / block);
  p.rule = fmt::format(
      "device: {} sequences{} x ({:.1f} MiB state + rows), KV budget {} blocks ({:.2f} GiB, {} positions = {} "
      "sequences of {}) of {:.2f} GiB free after the weights",
      p.max_seqs, max_seqs > 0 ? " (--max-seqs)" : " (auto)", static_cast<double>(per_seq_fixed) / 1048576.0,
      p.kv_blocks, gib(static_cast<size_t>(p.kv_blocks * std::max<int64_t>(block, 0))), p.kv_blocks * 16,
      typical > 0 ? p.kv_blocks * block / typical : 0, kTypicalSequencePositions, gib(c.available_bytes));
  return p;
}

}  // namespace specserve::engine
