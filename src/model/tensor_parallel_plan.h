#pragma once
// The partition of a target model over `--tensor-parallel N` ranks (docs/DESIGN.md §6.1), Megatron style:
// column-parallel q/k/v, gate/up and the Gated DeltaNet input projections (a rank owns whole heads or
// columns), row-parallel o_proj, down_proj and DeltaNet out_proj (a rank owns the matching input columns and
// produces a partial sum that one all-reduce completes), the embedding and lm_head split by vocabulary rows.
// A pure function of the config and N: the CPU simulation (model/tensor_parallel_shards.h) and a multi-GPU
// path read the same table.
//
//   TensorParallelPlan p = plan_tensor_parallel(cfg, 2);
//   p.shares[1].q_heads  // {16, 32} for Qwen3-8B
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace specserve {

// [begin, end) indices of heads, columns or rows.
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const IndexRange&) const = default;
};

struct RankShare {
  IndexRange q_heads;      // attention query heads: q_proj rows (with their gate rows), o_proj columns
  IndexRange kv_heads;     // attention KV heads held: k_proj / v_proj rows and the rank's KV cache
  IndexRange gdn_k_heads;  // DeltaNet key heads: the q and k channels of in_proj_qkv and the conv
  IndexRange gdn_v_heads;  // DeltaNet value heads: v channels, in_proj_z/b/a rows, A_log, dt_bias, state, out_proj cols
  IndexRange mlp_columns;  // MLP intermediate columns: gate/up rows, down_proj columns
  IndexRange vocab_rows;   // embedding and lm_head rows
};

struct TensorParallelPlan {
  int ranks = 1;
  // Ranks that hold a copy of each KV head: N / num_key_value_heads when there are fewer KV heads than ranks
  // (each rank's query heads then all read one KV head, which it computes and caches itself), else 1.
  int kv_replicas = 1;
  std::vector<RankShare> shares;  // per rank
  // One line per rank ("rank 0: q heads [0, 16) kv heads [0, 4) ..."), for logs and `info`.
  std::string describe() const;
};

// Throws a one-line Error naming the config key when a shape does not divide: query heads, MLP width and
// DeltaNet key and value heads must be multiples of N; KV heads a multiple of N, or a divisor of N (then
// replicated, see kv_replicas). DeltaNet heads are never replicated: a copied head would carry its recurrent
// state twice. The vocabulary is split into N contiguous ranges whose sizes differ by at most one row.
TensorParallelPlan plan_tensor_parallel(const ModelConfig& cfg, int ranks);

}  // namespace specserve
