// TargetModel: loading (config + checkpoint + dtype), sequence creation, the batched forward over
// spans of several sequences, commit, and the embedding / lm_head access the DFlash drafter needs.
#include "model/target_model.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/layers.h"

namespace specserve {

struct TargetModel::Impl {
  ModelConfig cfg;
  const Ops* ops = nullptr;
  std::unique_ptr<WeightStore> weights;
  ModelParts parts;
  KvGeometry kv;
  std::shared_ptr<KvBlockPool> pool;
  int num_deltanet = 0;
};

namespace {
DType choose_dtype(const std::string& option, const Checkpoint& c) {
  if (option == "f32") return DType::F32;
  if (option == "bf16") return DType::BF16;
  SS_CHECK(option == "auto", "--dtype must be auto, f32 or bf16 (got '{}')", option);
  DType d = WeightStore::checkpoint_matrix_dtype(c);
  return d == DType::BF16 ? DType::BF16 : DType::F32;
}
}  // namespace

TargetModel::TargetModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TargetModel::~TargetModel() = default;

std::unique_ptr<TargetModel> TargetModel::load(const std::string& dir, const LoadOptions& options) {
  return with_context("loading model " + dir, [&] {
    if (options.threads > 0) ThreadPool::set_global_threads(options.threads);
    auto impl = std::make_unique<Impl>();
    impl->cfg = load_model_config(dir);
    impl->ops = &cpu_ops();
    auto checkpoint = Checkpoint::open(dir);
    DType dt = choose_dtype(options.dtype, *checkpoint);
    impl->weights = std::make_unique<WeightStore>(std::move(checkpoint), dt, options.map_weights);
    switch (impl->cfg.family) {
      case ModelFamily::Qwen3: impl->parts = build_qwen3(impl->cfg, *impl->weights); break;
      case ModelFamily::Qwen3_5: impl->parts = build_qwen3_5(impl->cfg, *impl->weights); break;
      default: fail("{} is not a target model family", family_name(impl->cfg.family));
    }
    int attention = 0;
    for (const auto& l : impl->parts.layers) {
      if (l.type == LayerType::LinearAttention)
        ++impl->num_deltanet;
      else
        ++attention;
    }
    const ArchSpec& s = impl->parts.spec;
    impl->kv = KvGeometry{attention, s.num_kv_heads, s.head_dim};
    if (attention > 0) impl->pool = std::make_shared<KvBlockPool>(impl->kv);
    return std::unique_ptr<TargetModel>(new TargetModel(std::move(impl)));
  });
}

const ModelConfig& TargetModel::config() const { return impl_->cfg; }
int64_t TargetModel::vocab_size() const { return impl_->parts.spec.vocab; }
int64_t TargetModel::hidden_size() const { return impl_->parts.spec.hidden; }
DType TargetModel::weight_dtype() const { return impl_->weights->matrix_dtype(); }
const Ops& TargetModel::ops() const { return *impl_->ops; }
TensorView TargetModel::embedding_table() const { return impl_->parts.embed; }

std::unique_ptr<SequenceState> TargetModel::new_sequence() const {
  auto s = std::make_unique<SequenceState>();
  ModelInternals::set_pool(*s, impl_->pool);
  const GdnDims& d = impl_->parts.spec.gdn;
  auto& layers = ModelInternals::deltanets(*s);
  layers.resize(static_cast<size_t>(impl_->num_deltanet));
  for (auto& l : layers) {
    l.state.assign(static_cast<size_t>(d.state_floats()), 0.0f);
    l.window.assign(static_cast<size_t>(d.conv_kernel - 1) * d.conv_dim(), 0.0f);
  }
  return s;
}

void TargetModel::embed(std::span<const int32_t> ids, const TensorView& out) const {
  impl_->ops->embedding(impl_->parts.embed, ids, out);
}

void TargetModel::lm_head(const TensorView& hidden, const TensorView& logits) const {
  impl_->ops->matmul(hidden, impl_->parts.lm_head, logits);
}

void TargetModel::final_norm(const TensorView& x, const TensorView& y) const {
  const ArchSpec& s = impl_->parts.spec;
  impl_->ops->rms_norm(x, impl_->parts.final_norm, s.norm, s.eps, y);
}

ForwardResult TargetModel::forward(const ForwardBatch& batch) {
  const Impl& m = *impl_;
  const ArchSpec& spec = m.parts.spec;
  const int64_t H = spec.hidden;
  BatchContext ctx;
  ctx.ops = m.ops;
  ctx.spec = &spec;
  ctx.kv = m.kv;
  ForwardResult result;
  std::set<const SequenceState*> seen;
  std::vector<int32_t> tokens;
  for (const auto& sp : batch.spans) {
    SS_CHECK(sp.state != nullptr, "forward: span without a sequence state");
    SS_CHECK(seen.insert(sp.state).second, "forward: a sequence appears twice in one batch");
    SS_CHECK(sp.state->pending() == 0, "forward: sequence has {} uncommitted extend rows (call commit first)",
             sp.state->pending());
    SS_CHECK(!sp.tokens.empty(), "forward: empty span");
    for (int32_t t : sp.tokens)
      SS_CHECK(t >= 0 && t < spec.vocab, "token id {} outside the vocabulary [0, {})", t, spec.vocab);
    result.span_first_row.push_back(ctx.rows);
    ctx.spans.push_back({sp.state, ctx.rows, static_cast<int64_t>(sp.tokens.size()), sp.state->length(), sp.mode});
    ctx.rows += static_cast<int64_t>(sp.tokens.size());
    tokens.insert(tokens.end(), sp.tokens.begin(), sp.tokens.end());
  }
  for (int l : batch.capture_layers)
    SS_CHECK(l >= 0 && l < static_cast<int>(m.parts.layers.size()), "capture layer {} out of range [0, {})", l,
             m.parts.layers.size());
  if (ctx.rows == 0) return result;

  for (auto& sp : ctx.spans) ModelInternals::ensure_blocks(*sp.state, sp.position + sp.rows);
  for (auto& sp : ctx.spans)
    for (int64_t i = 0; i < sp.rows; ++i) {
      const auto pos = static_cast<int32_t>(sp.position + i);
      ctx.positions.push_back(pos);
      ctx.attn_rows.push_back({ModelInternals::blocks(*sp.state).data(), pos});
    }

  Tensor x = Tensor::empty(DType::F32, {ctx.rows, H});
  m.ops->embedding(m.parts.embed, tokens, x);
  const int64_t C = static_cast<int64_t>(batch.capture_layers.size());
  if (C > 0) result.captured = Tensor::empty(DType::F32, {ctx.rows, C * H});
  for (size_t l = 0; l < m.parts.layers.size(); ++l) {
    m.parts.layers[l].forward(ctx, x);
    for (int64_t c = 0; c < C; ++c) {
      if (batch.capture_layers[c] != static_cast<int>(l)) continue;
      for (int64_t r = 0; r < ctx.rows; ++r)
        std::memcpy(result.captured.as<float>() + r * C * H + c * H, x.as<float>() + r * H, static_cast<size_t>(H) * 4);
    }
  }
  for (size_t i = 0; i < ctx.spans.size(); ++i) {
    auto& sp = ctx.spans[i];
    if (sp.mode == SpanMode::Prefill)
      ModelInternals::length(*sp.state) += sp.rows;
    else
      ModelInternals::pending(*sp.state) = sp.rows;
    const LogitsWanted want = batch.spans[i].logits;
    if (want == LogitsWanted::All)
      for (int64_t r = 0; r < sp.rows; ++r) result.logit_rows.push_back(sp.row_begin + r);
    else if (want == LogitsWanted::Last)
      result.logit_rows.push_back(sp.row_begin + sp.rows - 1);
  }
  const auto n = static_cast<int64_t>(result.logit_rows.size());
  if (n > 0) {
    Tensor sel = Tensor::empty(DType::F32, {n, H});
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(sel.as<float>() + i * H, x.as<float>() + result.logit_rows[i] * H, static_cast<size_t>(H) * 4);
    final_norm(sel, sel);
    result.logits = Tensor::empty(DType::F32, {n, spec.vocab});
    lm_head(sel, result.logits);
  }
  return result;
}

void TargetModel::commit(SequenceState& state, int64_t n) const {
  const int64_t k = state.pending();
  SS_CHECK(k > 0, "commit: the sequence has no pending extend");
  SS_CHECK(n >= 1 && n <= k, "commit: {} rows of a {}-row extend", n, k);
  for (const auto& l : impl_->parts.layers)
    if (l.type == LayerType::LinearAttention) l.deltanet.commit(*impl_->ops, impl_->parts.spec, state, n);
  ModelInternals::length(state) += n;
  ModelInternals::pending(state) = 0;
}

}  // namespace specserve
