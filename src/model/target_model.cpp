// TargetModel: loading (config + checkpoint + dtype), sequence creation, the batched forward over
// spans of several sequences, commit, and the embedding / lm_head access the DFlash drafter needs.
#include "model/target_model.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "backend/backend.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "io/checkpoint_layout.h"
#include "model/deltanet_snapshot.h"
#include "model/layers.h"
#include "model/tensor_parallel_shards.h"

namespace specserve {

struct TargetModel::Impl {
  ModelConfig cfg;
  Backend backend;  // the forward's ops and the memory its tensors live in
  const Ops* ops = nullptr;
  const Memory* mem = nullptr;
  std::unique_ptr<WeightStore> weights;  // host weights (on CUDA: what was uploaded, and the head)
  ModelParts parts;                      // weights in the backend's memory
  TensorView host_embed, host_final_norm, host_lm_head;
  Buffer device_weights;  // one block holding every uploaded weight (CUDA)
  KvGeometry kv;
  std::shared_ptr<KvBlockPool> pool;
  int num_deltanet = 0;
  // A sequence's DeltaNet states: one per layer, or with tensor parallelism one per rank and layer, each of
  // its rank's heads (model/tensor_parallel_shards.h).
  GdnDims state_gdn;
  int state_layers = 0;
  std::unique_ptr<TensorParallelShards> tp;  // null: unsharded
};

namespace {
// --dtype auto: the checkpoint's matrix dtype, bf16 for an fp8 checkpoint (its weights dequantised, then
// rounded to bf16; --dtype f32 keeps the exact dequantised values).
DType choose_dtype(const std::string& option, const ModelConfig& cfg, const Checkpoint& c) {
  if (option == "f32") return DType::F32;
  if (option == "bf16") return DType::BF16;
  SS_CHECK(option == "auto", "--dtype must be auto, f32 or bf16 (got '{}')", option);
  if (cfg.fp8_block128) return DType::BF16;
  DType d = WeightStore::checkpoint_matrix_dtype(c);
  return d == DType::BF16 ? DType::BF16 : DType::F32;
}

}  // namespace

std::vector<TensorView*> weight_views(ModelParts& p) {
  std::vector<TensorView*> v{&p.embed, &p.final_norm, &p.lm_head};
  for (auto& l : p.layers)
    v.insert(v.end(),
             {&l.input_norm,       &l.post_norm,     &l.attn.q_proj,       &l.attn.k_proj,     &l.attn.v_proj,
              &l.attn.o_proj,      &l.attn.q_norm,   &l.attn.k_norm,       &l.deltanet.in_qkv, &l.deltanet.in_z,
              &l.deltanet.in_b,    &l.deltanet.in_a, &l.deltanet.out_proj, &l.deltanet.conv,   &l.deltanet.a_log,
              &l.deltanet.dt_bias, &l.deltanet.norm, &l.mlp.gate,          &l.mlp.up,          &l.mlp.down});
  return v;
}

size_t distinct_weight_bytes(ModelParts p) {
  std::set<const void*> seen;
  size_t total = 0;
  for (const TensorView* v : weight_views(p))
    if (v->data != nullptr && seen.insert(v->data).second) total += v->nbytes() + v->scale_bytes();
  return total;
}

namespace {

// Fills result.argmax for the spans that asked (one Ops::argmax per distinct column count) and
// brings the other spans' logits rows to the host tensor result.logits (a no-op when `logits` is it).
void reduce_logits(const ForwardBatch& batch, ForwardResult& result, const Ops& ops, const TensorView& logits,
                   const Memory& mem) {
  const int64_t n = logits.dim(0), V = logits.dim(1);
  // The logits rows of each span, in order: [first, first + count).
  std::vector<std::pair<int64_t, int64_t>> rows_of(batch.spans.size());
  std::vector<int64_t> columns;
  int64_t at = 0;
  for (size_t i = 0; i < batch.spans.size(); ++i) {
    const SequenceSpan& sp = batch.spans[i];
    const int64_t count = sp.logits == LogitsWanted::All    ? static_cast<int64_t>(sp.tokens.size())
                          : sp.logits == LogitsWanted::Last ? 1
                                                            : 0;
    rows_of[i] = {at, count};
    at += count;
    if (sp.argmax_columns > 0 && count > 0) {
      SS_CHECK(sp.argmax_columns <= V, "forward: argmax over {} columns of {}-wide logits", sp.argmax_columns, V);
      if (std::find(columns.begin(), columns.end(), sp.argmax_columns) == columns.end())
        columns.push_back(sp.argmax_columns);
    }
  }
  if (!columns.empty()) {
    result.argmax.assign(static_cast<size_t>(n), -2);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t c : columns) {
      ops.argmax(logits, c, ids);
      for (size_t i = 0; i < batch.spans.size(); ++i)
        if (batch.spans[i].argmax_columns == c)
          for (int64_t r = rows_of[i].first; r < rows_of[i].first + rows_of[i].second; ++r)
            result.argmax[static_cast<size_t>(r)] = ids[static_cast<size_t>(r)];
    }
  }
  if (logits.data == result.logits.view().data) return;
  // One download per run of consecutive spans that want their rows (each download waits for the stream).
  const size_t row_bytes = static_cast<size_t>(V) * 4;
  int64_t run_first = 0, run_rows = 0;
  auto flush = [&] {
    if (run_rows > 0)
      mem.download(result.logits.as<char>() + run_first * row_bytes, logits.as<const char>() + run_first * row_bytes,
                   static_cast<size_t>(run_rows) * row_bytes);
    run_rows = 0;
  };
  for (size_t i = 0; i < batch.spans.size(); ++i) {
    const auto [first, count] = rows_of[i];
    if (count == 0) continue;
    if (batch.spans[i].argmax_columns > 0) {
      flush();
      continue;
    }
    if (run_rows == 0) run_first = first;
    run_rows += count;
  }
  flush();
}
}  // namespace

TargetModel::TargetModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TargetModel::~TargetModel() = default;

namespace {
// Where each tensor-parallel rank runs (docs/DESIGN.md §6.5): rank r in place r of the backend (on the CPU host
// memory of its own; on CUDA GPU r) where the backend has a place for each rank, else every rank in the
// model's memory (the one GPU: a check of the sharded model; CUDA_VISIBLE_DEVICES with one device asks for it).
std::vector<const Memory*> rank_placement(const Backend& b, int ranks) {
  if (ranks < 2 || b.device_memory == nullptr || b.devices < ranks) return {};
  std::vector<const Memory*> out;
  for (int r = 0; r < ranks; ++r) out.push_back(&b.device_memory(r));
  return out;
}

// The rest of a load once the weights are at hand: the family's parts, the upload to the backend's
// memory (tensors already there stay), the sharding and placement of tensor-parallel ranks, the KV geometry
// and pool.
void build_parts(TargetModel::Impl& impl, bool upload, const std::string& kv_dtype, int tensor_parallel,
                 const std::string& nccl_library) {
  switch (impl.cfg.family) {
    case ModelFamily::Qwen3: impl.parts = build_qwen3(impl.cfg, *impl.weights); break;
    case ModelFamily::Qwen3_5: impl.parts = build_qwen3_5(impl.cfg, *impl.weights); break;
    default: fail("{} is not a target model family", family_name(impl.cfg.family));
  }
  impl.host_embed = impl.parts.embed;
  impl.host_final_norm = impl.parts.final_norm;
  impl.host_lm_head = impl.parts.lm_head;
  if (upload && tensor_parallel > 0) {
    // Sharded before the upload (docs/DESIGN.md §6.5): each rank's slices go from the host to its own memory
    // (shard_model); the model's memory gets whole only what the target's helpers and a drafter read there.
    std::array<TensorView*, 3> whole{&impl.parts.embed, &impl.parts.lm_head, &impl.parts.final_norm};
    impl.device_weights = upload_tensors(whole, *impl.mem);
  } else if (upload) {
    impl.device_weights = upload_tensors(weight_views(impl.parts), *impl.mem);
  }
  int attention = 0;
  for (const auto& l : impl.parts.layers) {
    if (l.type == LayerType::LinearAttention)
      ++impl.num_deltanet;
    else
      ++attention;
  }
  const ArchSpec& s = impl.parts.spec;
  impl.kv = KvGeometry{attention, s.num_kv_heads, s.head_dim, resolve_kv_dtype(kv_dtype, impl.weights->matrix_dtype())};
  impl.state_gdn = s.gdn;
  impl.state_layers = impl.num_deltanet;
  if (tensor_parallel > 0) {
    const bool gpu = impl.mem->device() != Device::CPU;
    const std::vector<const Memory*> placement = rank_placement(impl.backend, tensor_parallel);
    if (gpu && tensor_parallel > 1 && placement.empty())
      SS_LOG_WARN("model",
                  "--tensor-parallel {}: all {} ranks run on one GPU (device 0), one after another ({} CUDA "
                  "device(s) visible), so this checks the sharded model and is slower than --tensor-parallel 1",
                  tensor_parallel, tensor_parallel, impl.backend.devices);
    impl.tp = shard_model(impl.parts, impl.cfg, tensor_parallel, impl.kv, impl.num_deltanet, *impl.ops, *impl.mem,
                          placement, nccl_library);
    std::string plan = impl.tp->plan.describe();
    if (!plan.empty() && plan.back() == '\n') plan.pop_back();
    const std::string where = !gpu                ? "the CPU simulation"
                              : placement.empty() ? "every rank on one GPU"
                                                  : fmt::format("rank r on GPU r, {} GPUs over NCCL", tensor_parallel);
    std::string sizes;
    for (size_t r = 0; r < impl.tp->ranks.size(); ++r)
      sizes += fmt::format("{}{:.2f}", r ? " / " : "", gib(impl.tp->ranks[r].weight_bytes()));
    SS_LOG_INFO("model", "tensor parallel over {} ranks ({}):\n{}\nweights a rank: {} GiB{}", tensor_parallel, where,
                plan, sizes,
                impl.device_weights.bytes() > 0
                    ? fmt::format(" (the first GPU also holds the whole embedding, lm_head and final norm: {:.2f} GiB)",
                                  gib(impl.device_weights.bytes()))
                    : "");
    impl.kv = impl.tp->pool_kv;
    impl.state_gdn = impl.tp->ranks[0].parts.spec.gdn;
    impl.state_layers = impl.num_deltanet * tensor_parallel;
  }
  if (attention > 0) impl.pool = impl.tp ? impl.tp->make_pool() : std::make_shared<KvBlockPool>(impl.kv, *impl.mem);
}
}  // namespace

std::unique_ptr<TargetModel> TargetModel::load(const std::string& dir, const LoadOptions& options) {
  return with_context("loading model " + dir, [&] {
    if (options.threads > 0) ThreadPool::set_global_threads(options.threads);
    auto impl = std::make_unique<Impl>();
    impl->cfg = load_model_config(dir);
    impl->backend = backend_named(options.backend);
    impl->ops = impl->backend.ops;
    impl->mem = impl->backend.memory;
    const bool on_host = impl->mem->device() == Device::CPU;
    auto checkpoint = Checkpoint::open(dir);
    resolve_checkpoint_layout(impl->cfg, *checkpoint);  // refuses what the model would not run as stored
    DType dt = choose_dtype(options.dtype, impl->cfg, *checkpoint);
    // On a device the host copy of a matrix is only an upload source: read it from the mapping.
    impl->weights = std::make_unique<WeightStore>(std::move(checkpoint), dt, options.map_weights || !on_host);
    SS_CHECK(options.fp8_weights == "keep" || options.fp8_weights == "dequantise",
             "--fp8-weights must be keep or dequantise (got '{}')", options.fp8_weights);
    // (--dtype f32 is the exact dequantised reference: there fp8 weights are always dequantised.)
    if (impl->cfg.fp8_block128 && options.fp8_weights == "keep" && dt == DType::BF16) impl->weights->set_keep_fp8(true);
    build_parts(*impl, !on_host, options.kv_dtype, options.tensor_parallel, options.nccl_library);
    return std::unique_ptr<TargetModel>(new TargetModel(std::move(impl)));
  });
}

std::unique_ptr<TargetModel> TargetModel::synthetic(const ModelConfig& config, const LoadOptions& options,
                                                    uint64_t seed) {
  if (options.threads > 0) ThreadPool::set_global_threads(options.threads);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->backend = backend_named(options.backend);
  impl->ops = impl->backend.ops;
  impl->mem = impl->backend.memory;
  SS_CHECK(options.dtype == "bf16" || options.dtype == "f32" || options.dtype == "auto",
           "--dtype must be auto, f32 or bf16 (got '{}')", options.dtype);
  const DType dt = options.dtype == "f32" ? DType::F32 : DType::BF16;
  auto tensors = std::make_shared<SyntheticTensors>(*impl->mem, seed, config.family == ModelFamily::Qwen3_5);
  impl->weights = std::make_unique<WeightStore>(tensors, dt);
  // An fp8 shape (synthetic_shapes.h "-fp8") is a Qwen fp8 checkpoint loaded with --fp8-weights keep (its
  // dequantised twin is the plain shape); --dtype f32, as on a checkpoint, dequantises: plain f32 matrices.
  if (config.fp8_block128 && dt == DType::BF16) impl->weights->set_keep_fp8(true);
  build_parts(*impl, false, options.kv_dtype, options.tensor_parallel, options.nccl_library);
  if (impl->mem->device() != Device::CPU) {
    // The weights exist only on the device: there are no host copies for host-side helpers.
    impl->host_embed = impl->host_final_norm = impl->host_lm_head = TensorView();
  }
  return std::unique_ptr<TargetModel>(new TargetModel(std::move(impl)));
}

const ModelConfig& TargetModel::config() const { return impl_->cfg; }
int64_t TargetModel::vocab_size() const { return impl_->parts.spec.vocab; }
int64_t TargetModel::hidden_size() const { return impl_->parts.spec.hidden; }
DType TargetModel::weight_dtype() const { return impl_->weights->matrix_dtype(); }
DType TargetModel::kv_dtype() const { return impl_->kv.dtype; }
std::string_view TargetModel::backend() const { return impl_->backend.name; }
const Ops& TargetModel::ops() const { return cpu_ops(); }
const Ops& TargetModel::forward_ops() const { return *impl_->ops; }
const Memory& TargetModel::forward_memory() const { return *impl_->mem; }
TensorView TargetModel::embedding_table() const { return impl_->host_embed; }
int TargetModel::tensor_parallel_ranks() const { return impl_->tp ? static_cast<int>(impl_->tp->ranks.size()) : 0; }
const Collective* TargetModel::collective() const { return impl_->tp ? impl_->tp->collective.get() : nullptr; }
std::vector<const Memory*> TargetModel::rank_memories() const {
  std::vector<const Memory*> out;
  if (impl_->tp)
    for (const RankModel& r : impl_->tp->ranks) out.push_back(r.mem);
  return out;
}

namespace {
// On a device a sequence's DeltaNet buffers are sized at creation for extends of up to this many
// rows (a γ = 15 verify), so steady-state steps allocate nothing; longer extends grow them.
constexpr int64_t kPresizedExtendRows = 16;

// Bytes of one DeltaNet layer's per-sequence buffers: committed and work state, conv window, and the
// pending rows of an extend of kPresizedExtendRows (pre-conv and prepared rows, g, beta).
struct DeltaNetBytes {
  size_t state, window, rows, gates;
  explicit DeltaNetBytes(const GdnDims& d)
      : state(static_cast<size_t>(d.state_floats()) * 4),
        window(static_cast<size_t>(d.conv_kernel - 1) * static_cast<size_t>(d.conv_dim()) * 4),
        rows(static_cast<size_t>(kPresizedExtendRows * d.conv_dim()) * 4),
        gates(static_cast<size_t>(kPresizedExtendRows * d.num_v_heads) * 4) {}
  size_t total() const { return 2 * state + window + 2 * rows + 2 * gates; }
};
}  // namespace

std::unique_ptr<SequenceState> TargetModel::new_sequence() const {
  auto s = std::make_unique<SequenceState>();
  ModelInternals::set_pool(*s, impl_->pool);
  const GdnDims& d = impl_->state_gdn;
  auto& layers = ModelInternals::deltanets(*s);
  layers.resize(static_cast<size_t>(impl_->state_layers));
  const DeltaNetBytes b(d);
  for (size_t i = 0; i < layers.size(); ++i) {
    auto& l = layers[i];
    // Under tensor parallelism a slot is its rank's, in the rank's memory.
    const Memory& mem = impl_->tp ? impl_->tp->slot_memory(i) : *impl_->mem;
    l.mem = &mem;
    l.state = Buffer(mem, b.state);
    mem.zero(l.state.data(), l.state.bytes());
    l.window = Buffer(mem, b.window);
    mem.zero(l.window.data(), l.window.bytes());
    if (mem.device() != Device::CPU) {
      l.work = Buffer(mem, b.state);
      l.pending_pre = Buffer(mem, b.rows);
      l.pending_qkv = Buffer(mem, b.rows);
      l.pending_g = Buffer(mem, b.gates);
      l.pending_beta = Buffer(mem, b.gates);
    }
  }
  return s;
}

namespace {
const TensorView& host_weight(const TensorView& v) {
  SS_CHECK(v.data != nullptr, "this synthetic model has its weights only on the device (no host-side helpers)");
  return v;
}
}  // namespace

size_t TargetModel::step_weight_bytes() const {
  ModelParts parts = impl_->parts;  // views only
  parts.embed = TensorView();
  return distinct_weight_bytes(std::move(parts));
}

size_t TargetModel::dequantised_step_weight_bytes() const {
  ModelParts parts = impl_->parts;
  parts.embed = TensorView();
  std::set<const void*> seen;
  size_t total = 0;
  const size_t element = dtype_size(impl_->weights->matrix_dtype());
  for (const TensorView* v : weight_views(parts))
    if (v->data && seen.insert(v->data).second)
      total += v->block_scaled() ? static_cast<size_t>(v->numel()) * element : v->nbytes();
  return total;
}

size_t TargetModel::kv_block_bytes() const { return static_cast<size_t>(impl_->kv.block_bytes()); }

size_t TargetModel::sequence_state_bytes() const {
  return static_cast<size_t>(impl_->state_layers) * DeltaNetBytes(impl_->state_gdn).total();
}

void TargetModel::reserve(int64_t kv_blocks, int sequences) {
  if (impl_->pool) impl_->pool->reserve(kv_blocks);
  const Memory& mem = *impl_->mem;
  if (mem.device() == Device::CPU || impl_->num_deltanet == 0 || sequences <= 0) return;
  // Each memory must hold its slots' states (a rank's on its GPU under tensor parallelism; every slot in the
  // model's memory otherwise).
  const DeltaNetBytes b(impl_->state_gdn);
  const auto slots_n = static_cast<size_t>(impl_->state_layers);
  auto slot_memory = [&](size_t slot) -> const Memory& { return impl_->tp ? impl_->tp->slot_memory(slot) : mem; };
  std::map<const Memory*, size_t> need;
  for (size_t slot = 0; slot < slots_n; ++slot) need[&slot_memory(slot)] += static_cast<size_t>(sequences) * b.total();
  for (const auto& [m, bytes] : need)
    require_room(*m, bytes, fmt::format("the DeltaNet state of {} sequences", sequences), " (lower --max-seqs)");
  // Allocated and released at once: the device allocator keeps the blocks cached by size class, and
  // every sequence's state buffers later come from them.
  std::vector<Buffer> slots;
  for (int64_t i = 0; i < int64_t{sequences} * impl_->state_layers; ++i) {
    const Memory& in = slot_memory(static_cast<size_t>(i) % slots_n);
    for (size_t bytes : {b.state, b.state, b.window, b.rows, b.rows, b.gates, b.gates}) slots.emplace_back(in, bytes);
  }
}

// Host tensors run on the CPU with the host weights; device tensors on the backend.
void TargetModel::embed(std::span<const int32_t> ids, const TensorView& out) const {
  if (out.device == Device::CPU)
    cpu_ops().embedding(host_weight(impl_->host_embed), ids, out);
  else
    impl_->ops->embedding(impl_->parts.embed, ids, out);
}

void TargetModel::lm_head(const TensorView& hidden, const TensorView& logits) const {
  if (hidden.device == Device::CPU)
    cpu_ops().matmul(hidden, host_weight(impl_->host_lm_head), logits);
  else
    impl_->ops->matmul(hidden, impl_->parts.lm_head, logits);
}

TensorView TargetModel::lm_head_weight(Device where) const {
  return where == Device::CPU ? host_weight(impl_->host_lm_head) : impl_->parts.lm_head;
}

void TargetModel::final_norm(const TensorView& x, const TensorView& y) const {
  const ArchSpec& s = impl_->parts.spec;
  if (x.device == Device::CPU)
    cpu_ops().rms_norm(x, host_weight(impl_->host_final_norm), s.norm, s.eps, y);
  else
    impl_->ops->rms_norm(x, impl_->parts.final_norm, s.norm, s.eps, y);
}

ForwardResult TargetModel::forward(const ForwardBatch& batch) {
  const Impl& m = *impl_;
  const ArchSpec& spec = m.parts.spec;
  const int64_t H = spec.hidden;
  const Memory& mem = *m.mem;
  const bool on_host = mem.device() == Device::CPU;
  BatchContext ctx;
  ctx.ops = m.ops;
  ctx.mem = m.mem;
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

  ctx.build_runs();
  for (auto& sp : ctx.spans) ModelInternals::ensure_blocks(*sp.state, sp.position + sp.rows);
  for (auto& sp : ctx.spans)
    for (int64_t i = 0; i < sp.rows; ++i) {
      const auto pos = static_cast<int32_t>(sp.position + i);
      ctx.attn_rows.push_back({ModelInternals::blocks(*sp.state).data(), pos});
    }

  // Results are host tensors; on a device they are computed there and downloaded at the end.
  MemTensor x = MemTensor::empty(mem, DType::F32, {ctx.rows, H});
  MemTensor normed = MemTensor::empty(mem, DType::F32, {ctx.rows, H});
  // With tensor parallelism every rank's mixer and MLP run as partials, then the fixed-order all-reduce; each
  // rank holds its own replica of the activations (rank 0's are x and normed, which the captures and the
  // drafter beside rank 0 read).
  std::optional<TensorParallelStep> tp;
  if (m.tp) tp.emplace(*m.tp, m.pool.get(), ctx, x, normed);
  if (tp)
    tp->embed(tokens);
  else
    m.ops->embedding(m.parts.embed, tokens, x);
  const int64_t C = static_cast<int64_t>(batch.capture_layers.size());
  MemTensor captured_dev;
  TensorView captured;
  if (C > 0) {
    if (on_host) {
      result.captured = Tensor::empty(DType::F32, {ctx.rows, C * H});
      captured = result.captured.view();
    } else {
      captured_dev = MemTensor::empty(mem, DType::F32, {ctx.rows, C * H});
      captured = captured_dev.view();
    }
  }
  const auto& layers = m.parts.layers;
  if (tp)
    tp->first_norm();
  else if (!layers.empty())
    m.ops->rms_norm(x, layers[0].input_norm, spec.norm, spec.eps, normed);
  for (size_t l = 0; l < layers.size(); ++l) {
    const TensorView* next_norm = l + 1 < layers.size() ? &layers[l + 1].input_norm : nullptr;
    if (tp)
      tp->layer(l);
    else
      layers[l].forward(ctx, x, normed, next_norm);
    for (int64_t c = 0; c < C; ++c) {
      if (batch.capture_layers[c] != static_cast<int>(l)) continue;
      const auto row = static_cast<size_t>(H) * 4;
      mem.copy_2d(captured.as<float>() + c * H, static_cast<size_t>(C) * row, x.as<float>(), row, row,
                  static_cast<size_t>(ctx.rows));
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
    // The wanted rows after the final norm, times the lm_head (with tensor parallelism each rank its own rows
    // and vocabulary columns, gathered).
    auto head = [&](const TensorView& logits) {
      if (tp) return tp->lm_head(result.logit_rows, logits);
      MemTensor sel = MemTensor::empty(mem, DType::F32, {n, H});
      copy_logit_rows(mem, x, result.logit_rows, sel);
      m.ops->rms_norm(sel, m.parts.final_norm, spec.norm, spec.eps, sel);
      m.ops->matmul(sel, m.parts.lm_head, logits);
    };
    result.logits = Tensor::empty(DType::F32, {n, spec.vocab});
    if (on_host) {
      head(result.logits);
      reduce_logits(batch, result, *m.ops, result.logits, mem);
    } else {
      MemTensor logits = MemTensor::empty(mem, DType::F32, {n, spec.vocab});
      head(logits);
      reduce_logits(batch, result, *m.ops, logits, mem);
    }
  }
  if (C > 0 && !on_host) {
    if (batch.capture_on_device) {
      result.captured_device = std::move(captured_dev);
    } else {
      result.captured = Tensor::empty(DType::F32, captured_dev.shape());
      mem.download(result.captured.as<void>(), captured_dev.as<void>(), captured_dev.nbytes());
    }
  }
  return result;
}

std::shared_ptr<KvBlockPool> TargetModel::kv_pool() const { return impl_->pool; }

size_t TargetModel::snapshot_bytes() const { return deltanet_snapshot_bytes(impl_->state_gdn, impl_->state_layers); }

int64_t TargetModel::snapshot_blocks() const {
  // Each plane of a block holds its rank's slots (one plane, every slot, unsharded).
  if (!impl_->pool) return 0;
  const int planes = impl_->pool->planes();
  const size_t bytes = deltanet_snapshot_bytes(impl_->state_gdn, impl_->state_layers / planes);
  const size_t block = impl_->pool->plane_bytes();
  return bytes == 0 || block == 0 ? 0 : static_cast<int64_t>((bytes + block - 1) / block);
}

namespace {
// The planes of a snapshot in `blocks` (the pool's plane-0 addresses): one a rank, each the rank's slots.
std::vector<SnapshotPlane> snapshot_planes(const TargetModel::Impl& m, std::span<void* const> blocks) {
  SS_CHECK(m.pool != nullptr, "snapshot: the model has no KV pool");
  const int planes = m.pool->planes();
  const auto slots = static_cast<size_t>(m.state_layers / planes);
  std::vector<SnapshotPlane> out(static_cast<size_t>(planes));
  for (int p = 0; p < planes; ++p) {
    SnapshotPlane& sp = out[static_cast<size_t>(p)];
    sp.mem = m.tp ? m.tp->ranks[static_cast<size_t>(p)].mem : m.mem;
    sp.first_slot = static_cast<size_t>(p) * slots;
    sp.slots = slots;
    m.pool->plane_blocks(p, blocks, sp.blocks);
  }
  return out;
}
}  // namespace

void TargetModel::save_snapshot(const SequenceState& s, std::span<void* const> blocks) const {
  save_deltanet_snapshot(impl_->state_gdn, s, snapshot_planes(*impl_, blocks), impl_->pool->plane_bytes());
}

void TargetModel::restore_snapshot(std::span<void* const> blocks, SequenceState& s) const {
  restore_deltanet_snapshot(impl_->state_gdn, snapshot_planes(*impl_, blocks), impl_->pool->plane_bytes(), s);
}

void TargetModel::commit(SequenceState& state, int64_t n) const {
  const std::pair<SequenceState*, int64_t> one{&state, n};
  commit_many(std::span(&one, 1));
}

void TargetModel::commit_many(std::span<const std::pair<SequenceState*, int64_t>> commits) const {
  std::vector<DeltaNetBlock::Commit> items;
  std::set<const SequenceState*> seen;
  for (const auto& [state, n] : commits) {
    SS_CHECK(state != nullptr && seen.insert(state).second, "commit: a sequence appears twice (or is null)");
    const int64_t k = state->pending();
    SS_CHECK(k > 0, "commit: the sequence has no pending extend");
    SS_CHECK(n >= 1 && n <= k, "commit: {} rows of a {}-row extend", n, k);
    items.push_back({state, n});
  }
  // Every DeltaNet layer's window copies in one copy_many.
  std::vector<CopyRegion> copies;
  std::vector<Buffer> retired;
  if (impl_->tp) {
    tensor_parallel_commit(*impl_->tp, items, retired);
  } else {
    for (const auto& l : impl_->parts.layers)
      if (l.type == LayerType::LinearAttention)
        l.deltanet.commit(*impl_->ops, *impl_->mem, impl_->parts.spec, items, copies, retired);
  }
  impl_->mem->copy_many(copies);
  for (const auto& c : items) {
    ModelInternals::length(*c.state) += c.n;
    ModelInternals::pending(*c.state) = 0;
  }
}

}  // namespace specserve
