// plan_tensor_parallel: which heads, columns and vocabulary rows each rank owns (docs/DESIGN.md §6.1).
#include "model/tensor_parallel_plan.h"

#include <fmt/format.h>

#include "core/error.h"

namespace specserve {

namespace {

constexpr int kMaxRanks = 64;

// Rank r's share of `count` items split evenly; `what` names the config key in the error.
IndexRange even_share(int64_t count, int ranks, int r, const char* what) {
  SS_CHECK(count % ranks == 0, "--tensor-parallel {}: {} = {} is not a multiple of {}", ranks, what, count, ranks);
  const int64_t each = count / ranks;
  return {r * each, (r + 1) * each};
}

}  // namespace

TensorParallelPlan plan_tensor_parallel(const ModelConfig& cfg, int ranks) {
  SS_CHECK(ranks >= 1 && ranks <= kMaxRanks, "--tensor-parallel must be between 1 and {} (got {})", kMaxRanks, ranks);
  SS_CHECK(cfg.vocab_size >= ranks, "--tensor-parallel {}: vocab_size {} has fewer rows than ranks", ranks,
           cfg.vocab_size);
  TensorParallelPlan plan;
  plan.ranks = ranks;
  const bool attention = cfg.num_attention_layers() > 0, deltanet = cfg.num_linear_layers() > 0;
  if (attention && cfg.num_kv_heads < ranks) {
    SS_CHECK(
        ranks % cfg.num_kv_heads == 0,
        "--tensor-parallel {}: num_key_value_heads = {} neither divides into {} ranks nor divides {} (a KV head is "
        "replicated only on a whole number of ranks)",
        ranks, cfg.num_kv_heads, ranks, ranks);
    plan.kv_replicas = ranks / cfg.num_kv_heads;
  }
  for (int r = 0; r < ranks; ++r) {
    RankShare s;
    if (attention) {
      s.q_heads = even_share(cfg.num_heads, ranks, r, "num_attention_heads");
      if (plan.kv_replicas > 1) {
        const int64_t head = r / plan.kv_replicas;
        s.kv_heads = {head, head + 1};
      } else {
        s.kv_heads = even_share(cfg.num_kv_heads, ranks, r, "num_key_value_heads");
      }
    }
    if (deltanet) {
      s.gdn_k_heads = even_share(cfg.linear_num_key_heads, ranks, r, "linear_num_key_heads");
      s.gdn_v_heads = even_share(cfg.linear_num_value_heads, ranks, r, "linear_num_value_heads");
    }
    s.mlp_columns = even_share(cfg.intermediate_size, ranks, r, "intermediate_size");
    s.vocab_rows = {cfg.vocab_size * r / ranks, cfg.vocab_size * (r + 1) / ranks};
    plan.shares.push_back(s);
  }
  return plan;
}

std::string TensorParallelPlan::describe() const {
  auto range = [](const IndexRange& r) { return fmt::format("[{}, {})", r.begin, r.end); };
  std::string out;
  for (int r = 0; r < ranks; ++r) {
    const RankShare& s = shares[static_cast<size_t>(r)];
    out +=
        fmt::format("rank {}: q heads {} kv heads {}{} deltanet k heads {} v heads {} mlp columns {} vocab rows {}\n",
                    r, range(s.q_heads), range(s.kv_heads), kv_replicas > 1 ? " (replicated)" : "",
                    range(s.gdn_k_heads), range(s.gdn_v_heads), range(s.mlp_columns), range(s.vocab_rows));
  }
  return out;
}

}  // namespace specserve
