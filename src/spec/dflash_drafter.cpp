#include "spec/dflash_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"
#include "spec/draft_vocabulary.h"

namespace specserve::spec {

namespace {

// Every weight view of the drafter.
std::vector<TensorView*> weight_views(DrafterWeights& w) {
  std::vector<TensorView*> v{&w.fc, &w.hidden_norm, &w.norm};
  for (auto& L : w.layers)
    v.insert(v.end(), {&L.input_norm, &L.post_norm, &L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.q_norm, &L.k_norm,
                       &L.gate, &L.up, &L.down});
  return v;
}

// The rows of one drafter call, laid out [context rows of every sequence ; block rows of every
// block]. Context and block rows share the k/v projections (one matmul per weight); only block
// rows have queries.
struct CallRows {
  int64_t context = 0;                   // Nc
  int64_t block = 0;                     // Nb = blocks · (gamma + 1)
  std::vector<AttentionRow> kv_store;    // per row (context then block): RoPE position and cache slot
  std::vector<int32_t> q_positions;      // per block row
  std::vector<AttentionRow> full_attn;   // per block row: every context key + the whole block
  std::vector<AttentionRow> slide_attn;  // per block row: causal in the block, window W (§1.7)
};

}  // namespace

DFlashDrafter::DFlashDrafter(const TargetModel& target, std::unique_ptr<DrafterCheckpoint> checkpoint, bool on_host)
    : target_(target),
      checkpoint_(std::move(checkpoint)),
      ops_(on_host ? &cpu_ops() : &target.forward_ops()),
      mem_(on_host ? &cpu_memory() : &target.forward_memory()),
      weights_(checkpoint_->weights()) {
  const ModelConfig& c = checkpoint_->config();
  kv_ = KvGeometry{c.num_layers, c.num_kv_heads, c.head_dim, target.kv_dtype()};  // the target's KV dtype
  pool_ = std::make_shared<KvBlockPool>(kv_, *mem_);
  if (mem_->device() != Device::CPU) {
    device_weights_ = upload_tensors(weight_views(weights_), *mem_);
  }
}

MatmulOrder parse_draft_matmul(std::string_view name) {
  if (name == "fast") return MatmulOrder::Free;
  if (name == "exact") return MatmulOrder::RowInvariant;
  fail("--draft-matmul must be fast or exact (got '{}')", name);
}

std::unique_ptr<DFlashDrafter> DFlashDrafter::load(const std::string& dir, const TargetModel& target,
                                                   const std::string& dtype, bool on_host) {
  TargetShape shape;
  shape.hidden = target.hidden_size();
  shape.vocab = target.vocab_size();
  shape.embedding_rows = target.embedding_table().dim(0);
  shape.num_layers = target.config().num_layers;
  auto checkpoint = DrafterCheckpoint::load(dir, shape, dtype);
  // A wrong pair that happens to have matching shapes still loads: say what was paired (§2.3).
  const ModelConfig& c = checkpoint->config();
  SS_LOG_INFO("dflash", "drafter {}: {} layers, block {}, taps [{}] of a {}-layer {} target, mask id {}, {}, on {}",
              dir, c.num_layers, c.dflash->block_size, fmt::join(c.dflash->target_layer_ids, ","), shape.num_layers,
              target.config().model_type, c.dflash->mask_token_id, dtype_name(checkpoint->matrix_dtype()),
              on_host ? "cpu" : target.backend());
  return std::unique_ptr<DFlashDrafter>(new DFlashDrafter(target, std::move(checkpoint), on_host));
}

std::unique_ptr<DFlashDrafter> DFlashDrafter::synthetic(const ModelConfig& config, const TargetModel& target,
                                                        uint64_t seed) {
  TargetShape shape;
  shape.hidden = target.hidden_size();
  shape.vocab = target.vocab_size();
  shape.embedding_rows = target.config().vocab_size;
  shape.num_layers = target.config().num_layers;
  auto tensors = std::make_shared<SyntheticTensors>(target.forward_memory(), seed);
  auto checkpoint = DrafterCheckpoint::synthetic(config, shape, target.weight_dtype(), tensors);
  return std::unique_ptr<DFlashDrafter>(new DFlashDrafter(target, std::move(checkpoint), false));
}

size_t DFlashDrafter::weight_bytes() const {
  DrafterWeights views = weights_;  // views only
  size_t total = 0;
  for (const TensorView* v : weight_views(views)) total += v->nbytes();
  return total;
}

size_t DFlashDrafter::head_bytes() const {
  return head_ids_.empty() ? target_.lm_head_weight(mem_->device()).nbytes() : head_.bytes();
}

bool DFlashDrafter::select_vocabulary(const std::string& arg, const tokenizer::Tokenizer* tok) {
  if (arg.empty() || arg == "all") return false;
  set_vocabulary(draft_vocabulary(arg, always_drafted(tok, target_.config()), vocab_size()));
  return true;
}

void DFlashDrafter::set_vocabulary(std::vector<int32_t> ids) {
  const int64_t V = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    SS_CHECK(ids[i] >= 0 && ids[i] < V, "--draft-vocab: id {} outside the vocabulary [0, {})", ids[i], V);
    SS_CHECK(i == 0 || ids[i - 1] < ids[i], "--draft-vocab: ids must be ascending and unique ({} after {})", ids[i],
             ids[i - 1]);
  }
  head_ = Buffer();
  head_ids_.clear();
  head_pitch_ = 0;
  if (ids.empty() || static_cast<int64_t>(ids.size()) == V) return;  // the whole vocabulary: the target's head
  // The rows in order, runs of consecutive ids as one copy (a prefix of the vocabulary is one).
  const TensorView full = target_.lm_head_weight(mem_->device());
  const size_t row = static_cast<size_t>(full.dim(1)) * dtype_size(full.dtype);
  const size_t pitch = static_cast<size_t>(full.strides[0]) * dtype_size(full.dtype);
  SS_CHECK(full.strides[1] == 1, "drafter head: the lm_head's rows are not contiguous");
  // Rows past the subset pad the head to a multiple of 64 (zero rows, never read back): an odd row count
  // makes the logits' row pitch odd, and cuBLASLt then picked a 1-aligned Turing kernel that ran the
  // 27B's 32,769-row head at B = 16 as slowly as the whole 248,320-row one (0.9 ms).
  const size_t padded = (ids.size() + 63) / 64 * 64;
  Buffer head(*mem_, padded * row);
  if (padded > ids.size()) mem_->zero(static_cast<char*>(head.data()) + ids.size() * row, (padded - ids.size()) * row);
  std::vector<CopyRegion> runs;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i + 1;
    if (pitch == row)
      while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    runs.push_back({static_cast<char*>(head.data()) + i * row, static_cast<const char*>(full.data) + ids[i] * pitch,
                    (j - i) * row});
    i = j;
  }
  constexpr size_t kPerCall = 512;  // regions per copy_many (a device stages its table)
  for (size_t i = 0; i < runs.size(); i += kPerCall)
    mem_->copy_many(std::span(runs).subspan(i, std::min(kPerCall, runs.size() - i)));
  head_dtype_ = full.dtype;
  head_ = std::move(head);
  head_ids_ = std::move(ids);
  head_pitch_ = static_cast<int64_t>(padded);
}

int64_t DFlashDrafter::feature_width() const {
  return static_cast<int64_t>(target_layer_ids().size()) * config().hidden_size;
}

std::unique_ptr<DrafterSequence> DFlashDrafter::new_sequence() const {
  return std::make_unique<DrafterSequence>(pool_, feature_width(), *mem_);
}

void DFlashDrafter::project_context(std::span<DrafterSequence* const> sequences) const { forward(sequences, {}, 0, 0); }

MemTensor DFlashDrafter::run_blocks(std::span<const DraftBlock> blocks, int gamma, int slots) const {
  SS_CHECK(gamma >= 1 && gamma < block_size(), "drafter: gamma {} outside [1, {}]", gamma, block_size() - 1);
  if (slots == 0) slots = gamma;
  SS_CHECK(slots >= 1 && slots <= gamma, "drafter: {} output slots for a block of {} drafts", slots, gamma);
  for (const DraftBlock& b : blocks) SS_CHECK(b.slots >= 0, "drafter: a block asks for {} output slots", b.slots);
  std::vector<DrafterSequence*> seqs;
  for (const auto& b : blocks) seqs.push_back(b.sequence);
  return forward(seqs, blocks, gamma, slots);
}

Tensor DFlashDrafter::draft_logits(std::span<const DraftBlock> blocks, int gamma, int slots) const {
  const MemTensor logits = run_blocks(blocks, gamma, slots);
  if (logits.nbytes() == 0) return Tensor();
  Tensor out = Tensor::empty(DType::F32, logits.shape());
  mem_->download(out.as<void>(), logits.as<void>(), logits.nbytes());
  if (head_ids_.empty()) return out;
  // A subset's columns back at their ids; the others are never drafted.
  const int64_t rows = out.view().dim(0), V = vocab_size(), Vs = head_rows(), pitch = out.view().dim(1);
  Tensor full = Tensor::empty(DType::F32, {rows, V});
  float* f = full.as<float>();
  std::fill(f, f + rows * V, -std::numeric_limits<float>::infinity());
  const float* c = out.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < Vs; ++j) f[r * V + head_ids_[static_cast<size_t>(j)]] = c[r * pitch + j];
  return full;
}

std::vector<int32_t> DFlashDrafter::draft_argmax(std::span<const DraftBlock> blocks, int gamma, int slots,
                                                 int64_t columns) const {
  const MemTensor logits = run_blocks(blocks, gamma, slots);
  if (logits.nbytes() == 0) return {};
  std::vector<int32_t> ids(static_cast<size_t>(logits.shape()[0]));
  if (head_ids_.empty()) {
    ops_->argmax(logits, columns, ids);
    return ids;
  }
  // The subset's ids below `columns` are a prefix of its columns.
  const auto below = std::lower_bound(head_ids_.begin(), head_ids_.end(), columns) - head_ids_.begin();
  ops_->argmax(logits, below, ids);
  for (int32_t& id : ids)
    if (id >= 0) id = head_ids_[static_cast<size_t>(id)];
  return ids;
}

MemTensor DFlashDrafter::forward(std::span<DrafterSequence* const> context_of, std::span<const DraftBlock> blocks,
                                 int gamma, int slots) const {
  const Ops& ops = *ops_;
  const ScopedMatmulOrder order(ops, matmul_order_);
  const Memory& mem = *mem_;
  const ModelConfig& cfg = config();
  const DrafterWeights& w = weights_;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim;
  const int nh = cfg.num_heads, nkv = cfg.num_kv_heads, rot = cfg.rotary_dim();
  const auto eps = static_cast<float>(cfg.rms_norm_eps);
  const int64_t B = gamma + 1;

  std::set<const DrafterSequence*> seen;
  for (const DrafterSequence* s : context_of)
    SS_CHECK(seen.insert(s).second, "drafter: a sequence appears twice in one call");

  // ---- lay out the rows -------------------------------------------------------------------------
  // Grow every block table first: the rows below keep pointers into them.
  for (DrafterSequence* s : context_of) s->ensure_blocks(s->rows());
  for (const DraftBlock& b : blocks) b.sequence->ensure_blocks(b.position + B);
  CallRows rows;
  for (DrafterSequence* s : context_of) {
    rows.context += s->waiting_rows();
    for (int64_t t = s->projected(); t < s->rows(); ++t) {
      rows.kv_store.push_back({s->blocks(), static_cast<int32_t>(t)});
    }
  }
  const int window = cfg.sliding_window.value_or(0);
  for (const DraftBlock& b : blocks) {
    DrafterSequence* s = b.sequence;
    // The block occupies the scratch positions s..s+gamma right after the context: a different s
    // would overwrite context K/V or leave a gap the block's queries would read.
    SS_CHECK(b.position == s->rows(), "drafter: block at position {} but the context holds {} rows", b.position,
             s->rows());
    const auto s0 = static_cast<int32_t>(b.position);
    for (int32_t k = 0; k < B; ++k) {
      rows.kv_store.push_back({s->blocks(), s0 + k});
      rows.q_positions.push_back(s0 + k);
      rows.full_attn.push_back({s->blocks(), s0 + static_cast<int32_t>(gamma), 0});
      if (window > 0) rows.slide_attn.push_back({s->blocks(), s0 + k, std::max(0, s0 + k - (window - 1))});
    }
  }
  rows.block = static_cast<int64_t>(blocks.size()) * B;
  const int64_t Nc = rows.context, Nb = rows.block, N = Nc + Nb;
  if (N == 0) return MemTensor();

  // x = [c ; u]: rows 0..Nc are the projected context (fixed across layers), rows Nc.. each
  // layer's normalised block hidden states.
  MemTensor x = MemTensor::empty(mem, DType::F32, {N, H});
  if (Nc > 0) {
    MemTensor feats = MemTensor::empty(mem, DType::F32, {Nc, feature_width()});
    float* dst = feats.as<float>();
    std::vector<CopyRegion> gather;  // every waiting row, in order: one copy launch on a device
    for (DrafterSequence* s : context_of)
      for (const DrafterSequence::WaitingPage& page : s->waiting_features()) {
        const TensorView rows = page.view();
        gather.push_back({dst, rows.data, rows.nbytes()});
        dst += rows.numel();
      }
    mem.copy_many(gather);
    const TensorView c = x.view().rows(0, Nc);
    ops.matmul(feats, w.fc, c);
    ops.rms_norm(c, w.hidden_norm, NormKind::Plain, eps, c);
  }

  // The block: [pending, mask × gamma], embedded with the target's table.
  MemTensor z;
  if (Nb > 0) {
    std::vector<int32_t> tokens;
    for (const DraftBlock& b : blocks) {
      tokens.push_back(b.pending_token);
      tokens.insert(tokens.end(), static_cast<size_t>(gamma), mask_token());
    }
    z = MemTensor::empty(mem, DType::F32, {Nb, H});
    target_.embed(tokens, z);
  }

  const int64_t qw = nh * hd, kvw = nkv * hd;
  MemTensor k = MemTensor::empty(mem, DType::F32, {N, kvw});
  MemTensor v = MemTensor::empty(mem, DType::F32, {N, kvw});
  MemTensor q = MemTensor::empty(mem, DType::F32, {Nb, qw});  // (no rows when the call has no blocks)
  MemTensor attn, mixed, normed, gate, up;
  if (Nb > 0) {
    attn = MemTensor::empty(mem, DType::F32, {Nb, qw});
    mixed = MemTensor::empty(mem, DType::F32, {Nb, H});
    normed = MemTensor::empty(mem, DType::F32, {Nb, H});
    gate = MemTensor::empty(mem, DType::F32, {Nb, cfg.intermediate_size});
    up = MemTensor::empty(mem, DType::F32, {Nb, cfg.intermediate_size});
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const double theta = cfg.rope_theta;

  for (size_t l = 0; l < w.layers.size(); ++l) {
    const DrafterLayerWeights& L = w.layers[l];
    const TensorView u = x.view().rows(Nc, N);
    // The context rows are NOT normalised by input_layernorm (docs/DFLASH.md §1.2): only the block is.
    // The queries' matmul first, right after u's norm (it reads only u; on a GPU it then takes the
    // norm's bf16 copy of u), and the keys' and values' right after it: the two GEMMs run back to back
    // while the host records the norms, RoPE, KV store and attention that follow, where a GEMM on each
    // side of the k/v launches left the GPU waiting for the host (docs/history/GPU_PERF_NOTES.md, session 11).
    if (Nb > 0) {
      ops.rms_norm(z, L.input_norm, NormKind::Plain, eps, u);
      ops.matmul(u, L.q_proj, q);
    }
    TensorView kv_w[] = {L.k_proj, L.v_proj};
    TensorView kv_y[] = {k, v};
    ops.matmul_multi(x, kv_w, kv_y);
    // The heads' norms and RoPE of q and k, and the KV store, in one call (one launch on a GPU).
    const QkPrep prep{L.q_norm, L.k_norm, NormKind::Plain, eps, rot, theta};
    ops.qk_norm_rope_kv_store_rows(q, rows.q_positions, k, v, prep, kv_, static_cast<int>(l), rows.kv_store);
    if (Nb == 0) continue;

    const auto& attn_rows = L.type == LayerType::SlidingAttention ? rows.slide_attn : rows.full_attn;
    ops.attention(q, kv_, static_cast<int>(l), attn_rows, nh, scale, attn);
    // The residual adds in the GEMM where the backend can (ops.h: matmul_accumulate).
    if (!ops.matmul_accumulate(attn, L.o_proj, z)) {
      ops.matmul(attn, L.o_proj, mixed);
      ops.add(z, mixed);
    }

    ops.rms_norm(z, L.post_norm, NormKind::Plain, eps, normed);
    TensorView mlp_w[] = {L.gate, L.up};
    TensorView mlp_y[] = {gate, up};
    ops.matmul_multi(normed, mlp_w, mlp_y);
    ops.swiglu(gate, up, gate);
    if (!ops.matmul_accumulate(gate, L.down, z)) {
      ops.matmul(gate, L.down, mixed);
      ops.add(z, mixed);
    }
  }
  for (DrafterSequence* s : context_of) s->mark_projected();
  if (Nb == 0) return MemTensor();

  // Slots 1..slots_i of each block → the drafter's final norm → the target's lm_head.
  auto slots_of = [&](const DraftBlock& b) { return b.slots > 0 ? std::min(b.slots, slots) : slots; };
  int64_t n_out = 0;
  for (const DraftBlock& b : blocks) n_out += slots_of(b);
  MemTensor out = MemTensor::empty(mem, DType::F32, {n_out, H});
  std::vector<CopyRegion> slot_rows;  // one launch on a device, not one per block
  int64_t at = 0;                     // packed in block order
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int n = slots_of(blocks[i]);
    slot_rows.push_back({out.as<float>() + at * H, z.as<float>() + (static_cast<int64_t>(i) * B + 1) * H,
                         static_cast<size_t>(n * H) * sizeof(float)});
    at += n;
  }
  mem.copy_many(slot_rows);
  ops.rms_norm(out, w.norm, NormKind::Plain, eps, out);
  if (head_ids_.empty()) {
    MemTensor logits = MemTensor::empty(mem, DType::F32, {n_out, vocab_size()});
    target_.lm_head(out, logits);
    return logits;
  }
  MemTensor logits = MemTensor::empty(mem, DType::F32, {n_out, head_pitch_});
  ops.matmul(out, head_.view(head_dtype_, {head_pitch_, H}), logits);
  return logits;
}

}  // namespace specserve::spec
