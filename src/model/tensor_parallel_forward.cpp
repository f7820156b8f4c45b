// TensorParallelStep: one forward of the sharded target, rank by rank, with the fixed-order all-reduce after
// every row-parallel matmul (docs/DESIGN.md §6.2–6.3). Each rank's work runs with its memory's device current
// (MemoryDeviceScope: on CUDA its GPU's stream, recorder and allocator), so one thread issues every rank's.
#include "core/error.h"
#include "model/tensor_parallel_shards.h"

namespace specserve {

TensorParallelStep::TensorParallelStep(const TensorParallelShards& tp, const KvBlockPool* pool, const BatchContext& ctx,
                                       const TensorView& x, const TensorView& normed)
    : tp_(tp) {
  const size_t n = tp.ranks.size();
  ctx_.assign(n, ctx);
  tables_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    const RankModel& rank = tp.ranks[r];
    BatchContext& c = ctx_[r];
    c.spec = &rank.parts.spec;
    c.kv = rank.kv;
    c.ops = rank.ops;
    c.mem = rank.mem;
    one_memory_ = one_memory_ && rank.mem == tp.ranks[0].mem;
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
    if (r == 0) {
      x_.push_back(x);
      normed_.push_back(normed);
    } else {
      owned_.push_back(MemTensor::empty(*rank.mem, DType::F32, x.shape));
      x_.push_back(owned_.back().view());
      owned_.push_back(MemTensor::empty(*rank.mem, DType::F32, normed.shape));
      normed_.push_back(owned_.back().view());
    }
  }
}

template <class Fn>
void TensorParallelStep::on_each_rank(Fn fn) const {
  for (size_t r = 0; r < ctx_.size(); ++r) {
    const MemoryDeviceScope on_device(*ctx_[r].mem);
    fn(r);
  }
}

template <class Run>
void TensorParallelStep::reduce_ranks(std::span<const TensorView> outs, Run run) const {
  const int64_t rows = outs[0].dim(0), cols = outs[0].dim(1), n = static_cast<int64_t>(ctx_.size());
  // Each rank's partial in its memory; where every rank shares one memory, side by side as [N, rows, cols] in
  // rank order, which a one-memory collective sums in place.
  std::vector<MemTensor> partials;
  std::vector<TensorView> views;
  if (one_memory_) {
    partials.push_back(MemTensor::empty(*ctx_[0].mem, DType::F32, {n * rows, cols}));
    for (int64_t r = 0; r < n; ++r) views.push_back(partials[0].view().rows(r * rows, (r + 1) * rows));
  } else {
    for (const BatchContext& c : ctx_) {
      partials.push_back(MemTensor::empty(*c.mem, DType::F32, {rows, cols}));
      views.push_back(partials.back().view());
    }
  }
  on_each_rank([&](size_t r) { run(r, ctx_[r], views[r]); });
  tp_.collective->all_reduce_sum(views, outs);
}

void TensorParallelStep::embed(std::span<const int32_t> ids) const {
  const int64_t H = x_[0].dim(1);
  const size_t row = static_cast<size_t>(H) * 4;
  reduce_ranks(x_, [&](size_t r, const BatchContext& c, const TensorView& part) {
    const RankModel& rank = tp_.ranks[r];
    const Memory& mem = *c.mem;
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

void TensorParallelStep::first_norm() const {
  on_each_rank([&](size_t r) {
    const ModelParts& p = tp_.ranks[r].parts;
    if (!p.layers.empty()) ctx_[r].ops->rms_norm(x_[r], p.layers[0].input_norm, p.spec.norm, p.spec.eps, normed_[r]);
  });
}

void TensorParallelStep::layer(size_t l) const {
  const size_t n = ctx_.size();
  std::vector<MemTensor> owned;
  std::vector<TensorView> mixed;
  for (size_t r = 0; r < n; ++r) {
    owned.push_back(MemTensor::empty(*ctx_[r].mem, DType::F32, x_[r].shape));
    mixed.push_back(owned.back().view());
  }
  reduce_ranks(mixed, [&](size_t r, BatchContext& c, const TensorView& part) {
    const DecoderLayer& rl = tp_.ranks[r].parts.layers[l];
    if (rl.type == LayerType::LinearAttention)
      rl.deltanet.forward(c, normed_[r], part);
    else
      rl.attn.forward(c, normed_[r], part);
  });
  on_each_rank([&](size_t r) {
    const ModelParts& p = tp_.ranks[r].parts;
    ctx_[r].ops->add_rms_norm(x_[r], mixed[r], p.layers[l].post_norm, p.spec.norm, p.spec.eps, normed_[r]);
  });
  reduce_ranks(mixed, [&](size_t r, BatchContext& c, const TensorView& part) {
    tp_.ranks[r].parts.layers[l].mlp.forward(c, normed_[r], part);
  });
  on_each_rank([&](size_t r) {
    const ModelParts& p = tp_.ranks[r].parts;
    if (l + 1 < p.layers.size())
      ctx_[r].ops->add_rms_norm(x_[r], mixed[r], p.layers[l + 1].input_norm, p.spec.norm, p.spec.eps, normed_[r]);
    else
      ctx_[r].ops->add(x_[r], mixed[r]);
  });
}

void TensorParallelStep::lm_head(std::span<const int64_t> rows, const TensorView& logits) const {
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<MemTensor> parts;
  std::vector<TensorView> views;
  on_each_rank([&](size_t r) {
    const RankModel& rank = tp_.ranks[r];
    const Memory& mem = *ctx_[r].mem;
    MemTensor sel = MemTensor::empty(mem, DType::F32, {n, x_[r].dim(1)});
    copy_logit_rows(mem, x_[r], rows, sel);
    ctx_[r].ops->rms_norm(sel, rank.parts.final_norm, rank.parts.spec.norm, rank.parts.spec.eps, sel);
    parts.push_back(MemTensor::empty(mem, DType::F32, {n, rank.parts.spec.vocab}));
    ctx_[r].ops->matmul(sel, rank.parts.lm_head, parts.back());
    views.push_back(parts.back().view());
  });
  // Rank 0's logits are the forward's; the others' outputs alias them (the drafter and the sampler read rank
  // 0's).
  tp_.collective->all_gather_columns(views, std::vector<TensorView>(tp_.ranks.size(), logits));
}

}  // namespace specserve
