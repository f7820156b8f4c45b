#pragma once
// The target model: Qwen3 dense and Qwen3.5/3.6 dense hybrid (docs/MODELS.md), on the CPU backend or, with
// LoadOptions::backend = "cuda", on the GPU (cuda_ops(): weights, activations, the paged KV cache and
// the DeltaNet state in device memory; logits and captured features come back as host tensors).
//
// One batched forward serves every mode of the engine and the DFlash verifier: a batch is a list of
// spans, one per sequence, each a prefill chunk, one decode row or K extend (verify) rows at the
// sequence's next positions. All rows go through the same kernels; every op is row-invariant
// (backend/ops.h), so a row's logits and captured features do not depend on the other rows in the
// batch, and K extend rows give the same bits as K successive decodes.
//
//   auto model = TargetModel::load(dir, {.dtype = "auto"});
//   auto seq = model->new_sequence();
//   ForwardBatch b;  b.spans = {{seq.get(), prompt, SpanMode::Prefill, LogitsWanted::Last}};
//   auto r = model->forward(b);            // r.logits [1, vocab]
//   b.spans = {{seq.get(), {tok}, SpanMode::Extend, LogitsWanted::All}};
//   r = model->forward(b);  model->commit(*seq, 1);
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/collective.h"
#include "backend/memory.h"
#include "backend/ops.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "model/sequence_state.h"

namespace specserve {

struct LoadOptions {
  // Storage of the matmul weights and the embedding table: "auto" (the checkpoint's dtype; F16 becomes
  // f32; bf16 for an fp8 checkpoint, whose weights are dequantised at load), "f32" or "bf16". Activations,
  // norms and DeltaNet state are always f32.
  std::string dtype = "auto";
  // > 0: resizes the global CPU thread pool (ThreadPool::set_global_threads) at load.
  int threads = 0;
  // Use matrices straight from the mmap'd checkpoint when no conversion is needed (saves the copy
  // and the load time; reading weights through the mapping was slower on the development VM).
  bool map_weights = false;
  // Where the forward runs: "cpu" (default), "cuda" (device 0; needs a CUDA build and a device) or
  // "auto" (cuda when usable). On "cuda" the weights are uploaded once at load; the host-side helpers
  // below (ops(), embed, lm_head, final_norm on host tensors, embedding_table) keep working on host
  // copies, for a drafter kept on the host.
  std::string backend = "cpu";
  // Element type of the paged KV cache (`--kv-dtype`): "auto" (f32 when the weights are f32, as in the
  // `--dtype f32` parity runs, else bf16), "bf16" or "f32" (backend/ops.h: resolve_kv_dtype, KvGeometry).
  std::string kv_dtype = "auto";
  // What an fp8 block-128 checkpoint's Linear weights become (`--fp8-weights`, docs/MODELS.md §6.1):
  // "dequantise" (the default for now: bf16 or f32 copies made at load) or "keep" (they stay e4m3 with
  // their scales, half the bytes; each matmul dequantises in registers and gets the bits of the bf16
  // dequantisation; with dtype "f32", the exact dequantised reference, they are dequantised whatever this
  // says). No effect on other checkpoints.
  std::string fp8_weights = "dequantise";
  // Tensor parallelism (`--tensor-parallel`, docs/DESIGN.md §6): 0 runs the model unsharded; N >= 1 runs the
  // sharded forward over N ranks in this process (model/tensor_parallel_shards.h; N = 1 is one rank holding
  // everything: the unsharded bits through the sharded path): on the CPU backend the CPU simulation (each rank
  // in host memory of its own), on CUDA rank r on GPU r where the machine has N GPUs, else every rank on the
  // first (a check of the sharded model, not a speed-up).
  int tensor_parallel = 0;
  // The NCCL library for ranks on several GPUs (`--nccl-library`, backend/nccl_library.h): a path to
  // libnccl.so.2, or "" for the loader's search.
  std::string nccl_library = "";
};

enum class SpanMode {
  Prefill,  // committed at once; DeltaNet uses the chunked form (chunks aligned to multiples of 64)
  Extend,   // decode (1 row) or verify (K rows): DeltaNet stepped token by token; needs commit()
};

enum class LogitsWanted { None, Last, All };

struct SequenceSpan {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;  // at positions state->length() ... + tokens.size() - 1
  SpanMode mode = SpanMode::Extend;
  LogitsWanted logits = LogitsWanted::Last;
  // > 0: the caller needs only the argmax of each of this span's logits rows over their first
  // `argmax_columns` columns (Ops::argmax; e.g. a greedy request's real vocabulary). They land in
  // ForwardResult::argmax, and on a device backend the span's full rows stay on the device (their
  // rows of ForwardResult::logits are then unspecified).
  int64_t argmax_columns = 0;
};

struct ForwardBatch {
  std::vector<SequenceSpan> spans;
  // Decoder layers whose output (the residual stream after layer l, = HF hidden_states[l + 1], never
  // post-final-norm) is captured for every row, concatenated in this order.
  std::vector<int> capture_layers;
  // On a device backend: keep the captured rows there (ForwardResult::captured_device) instead of
  // downloading them, for a consumer in the same memory (a DFlash drafter beside the target).
  bool capture_on_device = false;
};

struct ForwardResult {
  // Rows are numbered across the batch: span 0's rows first, then span 1's, ...
  std::vector<int64_t> span_first_row;  // per span
  Tensor logits;                        // [logit_rows.size(), vocab] f32
  std::vector<int64_t> logit_rows;      // batch row of each logits row, in batch order
  // Per logits row: the row's argmax for spans with argmax_columns > 0 (-1: no finite entry), -2 for
  // other spans' rows. Empty when no span asked.
  std::vector<int32_t> argmax;
  Tensor captured;  // [rows, capture_layers.size() * hidden] f32 (empty if none)
  // The same rows left in the model's forward memory when the batch asked (capture_on_device) and the
  // model runs on a device; `captured` is then empty.
  MemTensor captured_device;
};

// Not thread-safe: one forward/commit at a time per model (the CPU kernels share the global thread
// pool). Prompts prefilled in several calls should be split at multiples of kGdnChunk (64) tokens:
// then the result does not depend on the split (the engine's prefill chunks depend only on the
// sequence anyway).
class TargetModel {
 public:
  static std::unique_ptr<TargetModel> load(const std::string& dir, const LoadOptions& options = {});
  // A model of `config`'s shapes with seeded random weights made in the backend's memory
  // (model/synthetic_tensors.h), for benchmarks on real shapes without a checkpoint. dtype "auto"
  // means bf16. On a device there are no host copies: embedding_table() is empty and the host-side
  // helpers throw.
  static std::unique_ptr<TargetModel> synthetic(const ModelConfig& config, const LoadOptions& options,
                                                uint64_t seed = 1);
  ~TargetModel();

  const ModelConfig& config() const;
  int64_t vocab_size() const;  // rows of the lm_head
  int64_t hidden_size() const;
  DType weight_dtype() const;        // storage of the matmul weights
  DType kv_dtype() const;            // element type of the KV cache (F32 or BF16)
  std::string_view backend() const;  // "cpu" or "cuda": where forward() runs
  // The ops of the host-side helpers (and of a drafter running on the host): cpu_ops() on every
  // backend.
  const Ops& ops() const;

  // The ops and the memory forward() runs on (cpu_ops() and host memory, or cuda_ops() and device
  // memory): a drafter running beside the target uses them.
  const Ops& forward_ops() const;
  const Memory& forward_memory() const;

  // Tensor parallelism (LoadOptions::tensor_parallel): the ranks (0: unsharded) and the collective that
  // reduces their partials (null when unsharded); a forward calls it 2 × layers + 1 times with [rows, hidden]
  // (the embedding, each mixer and MLP) and gathers [rows, vocab] once.
  int tensor_parallel_ranks() const;
  const Collective* collective() const;
  // Where each rank is placed (docs/DESIGN.md §6.5): rank r's memory, where its partials and activations live
  // and its ops run (MemoryDeviceScope); empty when unsharded.
  std::vector<const Memory*> rank_memories() const;

  std::unique_ptr<SequenceState> new_sequence() const;

  // Start-up sizing for serving (design: no allocation failure mid-request). Bytes of one KV block
  // (16 positions, every attention layer, in kv_dtype()) and of one sequence's DeltaNet state (committed + work
  // state and conv window of every DeltaNet layer), in the forward's memory.
  size_t kv_block_bytes() const;
  // Bytes of the weights every forward step reads in full: every layer's tensors and the final norm
  // and lm_head (not the embedding table, of which a step reads only its tokens' rows).
  // (Kept fp8 weights count their codes, one byte an element, and their f32 scales.)
  size_t step_weight_bytes() const;
  // The same with every kept fp8 weight (--fp8-weights keep) counted as its dequantised matrix in
  // weight_dtype() (bf16): what the step would read with the weights dequantised at load. Equal to
  // step_weight_bytes() when no weight is kept fp8.
  size_t dequantised_step_weight_bytes() const;
  size_t sequence_state_bytes() const;
  // Allocates `kv_blocks` KV blocks and the DeltaNet state of `sequences` sequences now (on a device:
  // from device memory, kept by its allocator for the sequences that come). Throws a one-line Error
  // with the sizes when they do not fit.
  void reserve(int64_t kv_blocks, int sequences);

  // The target's KV block pool (null for a model without attention layers): the prefix cache keeps
  // blocks of it (engine/prefix_cache.h).
  std::shared_ptr<KvBlockPool> kv_pool() const;
  // DeltaNet snapshots for the prefix cache (docs/DESIGN.md §5, model/deltanet_snapshot.cpp): the bytes of
  // one (every DeltaNet layer's committed state and conv window, in layer order; 0 for a dense model),
  // how many KV-pool blocks hold one, and the copies of a sequence's state (no pending rows) into such
  // blocks and back, bit for bit.
  size_t snapshot_bytes() const;
  int64_t snapshot_blocks() const;
  void save_snapshot(const SequenceState& s, std::span<void* const> blocks) const;
  void restore_snapshot(std::span<void* const> blocks, SequenceState& s) const;

  // Runs all spans; a span's state must have no pending rows. Extend spans leave their state
  // pending until commit().
  ForwardResult forward(const ForwardBatch& batch);
  // Keeps the first n (1 <= n <= pending) rows of the state's pending extend.
  void commit(SequenceState& state, int64_t n) const;
  // commit(state, n) of each pair, every DeltaNet layer's replays in one call (a few launches a layer
  // however many sequences; the same bits as committing each alone). A state appears at most once.
  void commit_many(std::span<const std::pair<SequenceState*, int64_t>> commits) const;

  // The input embedding table [vocab, hidden] (f32 or bf16, a host view) and the gather into f32
  // rows. embed, lm_head and final_norm run on the CPU for host tensors and on the model's device
  // for device tensors (CUDA backend).
  TensorView embedding_table() const;
  void embed(std::span<const int32_t> ids, const TensorView& out) const;
  // logits [R, vocab] = hidden [R, hidden] · lm_headᵀ, WITHOUT the final norm (the DFlash drafter
  // applies its own norm, then the target's head).
  void lm_head(const TensorView& hidden, const TensorView& logits) const;
  // The lm_head matrix [vocab, hidden] that lm_head() multiplies by for rows in `where`'s memory (the
  // host view for Device::CPU, else the forward memory's): the drafter gathers a vocabulary subset's
  // rows from it.
  TensorView lm_head_weight(Device where) const;
  // The target's final norm applied to rows [R, hidden] (y may alias x).
  void final_norm(const TensorView& x, const TensorView& y) const;

  struct Impl;

 private:
  explicit TargetModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace specserve
