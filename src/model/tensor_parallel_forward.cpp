// TensorParallelStep: one forward of the sharded target, rank by rank, with the fixed-order all-reduce after
// every row-parallel matmul (docs/DESIGN.md §6.2–6.3).
#include "core/error.h"
#include "model/tensor_parallel_shards.h"

namespace specserve {

TensorParallelStep::TensorParallelStep(const TensorParallelShards& tp, const KvBlockPool* pool, const BatchContext& ctx)
    : tp_(tp) {
  const size_t n = tp.ranks.size();
  ctx_.assign(n, ctx);
  tables_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    BatchContext& c = ctx_[r];
    c.spec = &tp.ranks[r].parts.spec;
    c.kv = tp.ranks[r].kv;
    c.ops = tp.ranks[r].ops;
    c.mem = tp.ranks[r].mem;
    c.attn_rows.clear();
    auto& tables = tables_[r];
    tables.resize(ctx.spans.size());
    for (size_t i = 0; i < ctx.spans.size(); ++i) {
      const BatchContext::Span& sp = ctx.spans[i];
      if (pool != nullptr) pool->plane_blocks(static_cast<int>(r), ModelInternals::blocks(*sp.state), tables[i]);
      for (int64_t k = 0; k < sp.rows; ++k) {
        const AttentionRow& full = ctx.attn_rows[static_cast<size_t>(sp.row_begin + k)];
        c.attn_rows.push_back({tables[i].data(), full.position, full.window_start});
      }
    }
  }
}

template <class Run>
void TensorParallelStep::reduce_ranks(const TensorView& out, Run run) const {
  const Memory& mem = *ctx_[0].mem;
  const int64_t rows = out.dim(0), n = static_cast<int64_t>(ctx_.size());
  // The partials side by side, [N, rows, cols] in rank order: a collective whose ranks share one memory sums
  // them in place.
  MemTensor partials = MemTensor::empty(mem, DType::F32, {n * rows, out.dim(1)});
  std::vector<TensorView> views;
  for (int64_t r = 0; r < n; ++r) {
    views.push_back(partials.view().rows(r * rows, (r + 1) * rows));
    run(static_cast<size_t>(r), ctx_[static_cast<size_t>(r)], views.back());
  }
  // One replicated activation stands for every rank's copy (they are equal by construction).
  const std::vector<TensorView> outs(ctx_.size(), out);
  tp_.collective->all_reduce_sum(views, outs);
}

void TensorParallelStep::embed(std::span<const int32_t> ids, const TensorView& x) const {
  const Memory& mem = *ctx_[0].mem;
  const int64_t H = x.dim(1);
  const size_t row = static_cast<size_t>(H) * 4;
  reduce_ranks(x, [&](size_t r, const BatchContext& c, const TensorView& part) {
    const RankModel& rank = tp_.ranks[r];
    mem.zero(part.data, part.nbytes());
    std::vector<int32_t> local;
    std::vector<int64_t> at;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t id = ids[i] - rank.vocab_begin;
      if (id < 0 || id >= rank.parts.spec.vocab) continue;
      local.push_back(static_cast<int32_t>(id));
      at.push_back(static_cast<int64_t>(i));
    }
    if (local.empty()) return;
    MemTensor rows = MemTensor::empty(mem, DType::F32, {static_cast<int64_t>(local.size()), H});
    c.ops->embedding(rank.parts.embed, local, rows);
    // Each looked-up row to its place, in one copy_many (one launch on a device).
    std::vector<CopyRegion> places;
    for (size_t k = 0; k < at.size(); ++k)
      places.push_back({part.as<float>() + at[k] * H, rows.as<float>() + static_cast<int64_t>(k) * H, row});
    mem.copy_many(places);
  });
}

void TensorParallelStep::layer(size_t l, const DecoderLayer& full, const ArchSpec& s, const TensorView& x,
                               const TensorView& normed, const TensorView* next_norm) const {
  const Ops& ops = *ctx_[0].ops;
  MemTensor mixed = MemTensor::empty(*ctx_[0].mem, DType::F32, x.shape);
  reduce_ranks(mixed, [&](size_t r, BatchContext& c, const TensorView& part) {
    const DecoderLayer& rl = tp_.ranks[r].parts.layers[l];
    if (rl.type == LayerType::LinearAttention)
      rl.deltanet.forward(c, normed, part);
    else
      rl.attn.forward(c, normed, part);
  });
  ops.add_rms_norm(x, mixed, full.post_norm, s.norm, s.eps, normed);
  reduce_ranks(mixed, [&](size_t r, BatchContext& c, const TensorView& part) {
    tp_.ranks[r].parts.layers[l].mlp.forward(c, normed, part);
  });
  if (next_norm != nullptr)
    ops.add_rms_norm(x, mixed, *next_norm, s.norm, s.eps, normed);
  else
    ops.add(x, mixed);
}

void TensorParallelStep::lm_head(const TensorView& hidden, const TensorView& logits) const {
  const Memory& mem = *ctx_[0].mem;
  std::vector<MemTensor> parts;
  std::vector<TensorView> views;
  for (const RankModel& rank : tp_.ranks) {
    parts.push_back(MemTensor::empty(mem, DType::F32, {hidden.dim(0), rank.parts.spec.vocab}));
    ctx_[0].ops->matmul(hidden, rank.parts.lm_head, parts.back());
    views.push_back(parts.back().view());
  }
  tp_.collective->all_gather_columns(views, std::vector<TensorView>(tp_.ranks.size(), logits));
}

}  // namespace specserve
