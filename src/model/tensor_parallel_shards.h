#pragma once
// Internal: the sharded target model (docs/DESIGN.md §6.3). shard_model cuts a loaded model's weights into the
// N ranks' slices of the partition plan (views where a slice is one range of rows or columns; copies for the
// DeltaNet in_proj_qkv and conv1d rows, three ranges each, and on a GPU for the column slices, which its
// matmul kernels read contiguous); TensorParallelStep runs one forward's layers rank by rank, each rank
// computing its partial of every row-parallel matmul, then the fixed-order all-reduce (backend/collective.h).
// Every rank runs in this process with the backend's ops, each in the memory shard_model places it in (its own
// host memory in the CPU simulation; its GPU, or every rank on the first where there are fewer GPUs than ranks),
// its work inside a MemoryDeviceScope of that memory.
//
// Per-sequence state is sharded like the weights without changing SequenceState: a KV block of the sharded
// model is one block in each of the pool's N planes (model/kv_cache.h; rank r's slice is plane r's block, in
// the rank's memory), and a sequence has one DeltaNet state per rank and layer (rank r's layer slot s at
// r · deltanet_layers + s, in the rank's memory).
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/collective.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/tensor_parallel_plan.h"

namespace specserve {

struct RankModel {
  ModelParts parts;  // spec with the rank's heads and widths (vocab: its rows); views of its slices
  KvGeometry kv;     // its KV heads: its plane of each block
  int64_t vocab_begin = 0;
  // Where the rank runs (shard_model's placement): its ops, which run with its memory's device current
  // (MemoryDeviceScope), and the memory of its KV plane, DeltaNet states and activations.
  const Ops* ops = nullptr;
  const Memory* mem = nullptr;
  std::vector<MemTensor> copies;  // its copied slices beside their matrices (released once moved to its device)
  Buffer relocated;               // its tensors copied from the model's device memory, when it runs on another
  Buffer uploaded;                // its tensors uploaded from the host, when it runs on a device
  // The bytes of the weights it reads (each tensor once, fp8 scales included), wherever they are.
  size_t weight_bytes() const;
};

struct TensorParallelShards {
  TensorParallelPlan plan;
  std::vector<RankModel> ranks;
  std::unique_ptr<Collective> collective;
  int deltanet_layers = 0;  // per rank
  KvGeometry pool_kv;       // a whole block's geometry (N rank planes): what a block costs the KV budget
  // The rank planes of the KV pool (model/kv_cache.h): one per rank, in its memory.
  std::shared_ptr<KvBlockPool> make_pool() const;
  // Rank r's memory for each of a sequence's DeltaNet slots (r · deltanet_layers + s).
  const Memory& slot_memory(size_t slot) const { return *ranks[slot / static_cast<size_t>(deltanet_layers)].mem; }
};

// `full_kv` is the unsharded model's KV geometry (its dtype and attention layer count are kept). `full`'s
// weights are on the host or in `mem` (a loaded model on a device: its layers on the host, its embedding, lm_head
// and final norm in `mem`; a synthetic one: all in `mem`), and each slice that is a copy (in_proj_qkv, conv1d; for
// a rank on a device the column slices too) is made beside its matrix. Rank r runs with `ops` in placement[r]
// (`mem` for every rank when empty), its weights put there by place_rank_weights, and the collective is
// placed_collective's (backend/collective.h; NCCL from `nccl_library` for several GPUs).
std::unique_ptr<TensorParallelShards> shard_model(const ModelParts& full, const ModelConfig& cfg, int ranks,
                                                  const KvGeometry& full_kv, int deltanet_layers, const Ops& ops,
                                                  const Memory& mem, std::span<const Memory* const> placement = {},
                                                  const std::string& nccl_library = "");

// Rank r's model of `plan` (its spec, its slices of `full`'s weights as shard_model describes them, its KV
// geometry), to run with `ops` in `rank_mem`, its weights put there by place_rank_weights.
RankModel shard_rank(const ModelParts& full, const TensorParallelPlan& plan, int r, int deltanet_layers,
                     const KvGeometry& full_kv, const Ops& ops, const Memory& model_mem, const Memory& rank_mem);

// Puts a rank's weights where it runs, when that is a device (nothing for a rank on the host: host memories read
// each other's tensors): its views of tensors in `model_mem` (a loaded model's embedding, lm_head and final norm,
// which stay whole there; every tensor of a synthetic model, made on the device) copied to its device when that
// is another, then its views of host tensors (a loaded model's layer slices: sharded before any upload, so a GPU
// holds its ranks' slices and not the whole model) uploaded, kept fp8 codes put in the device's order. Its slice
// copies that were moved are released. A host view must be contiguous (shard_model copies a device rank's column
// slices).
void place_rank_weights(RankModel& rank, const Memory& model_mem);

// Copies the tensors `views` point at (in `from`) into one block of `to` and points the views there (a tensor
// shared by several views once; null views skipped; a block-scaled matrix's scales with it): through the host,
// so any two memories (GPUs without peer access included). The views must be contiguous.
Buffer relocate_tensors(std::span<TensorView* const> views, const Memory& from, const Memory& to);

// One forward's rows seen by every rank: the rank contexts (their specs, ops, memory, KV geometry and block
// planes) and each rank's replica of the activations: rank 0's are the forward's x and normed [rows, hidden];
// every other rank's are its own, in its memory. Every rank computes the replicated parts (the norms, the
// residual adds) on its own replica, from the same inputs with the same ops, so the replicas stay
// bit-identical; a rank reads only its own.
class TensorParallelStep {
 public:
  // `pool` holds the ctx's sequences' blocks (null for a model without attention layers).
  TensorParallelStep(const TensorParallelShards& tp, const KvBlockPool* pool, const BatchContext& ctx,
                     const TensorView& x, const TensorView& normed);
  // Every rank's x <- the embedding rows: each rank gathers the rows of its vocabulary, zeros elsewhere, and
  // the all-reduce sums them.
  void embed(std::span<const int32_t> ids) const;
  // Every rank's normed <- its x through the first layer's input norm.
  void first_norm() const;
  // DecoderLayer::forward (layers.h) on every rank's replica, with each mixer and MLP run as N rank partials
  // and an all-reduce; each rank applies its own copy of the replicated norms.
  void layer(size_t l) const;
  // logits [R, vocab] <- the final norm of x's `rows`, times lm_headᵀ: each rank its own replica's rows and
  // its vocabulary's columns, gathered in rank order.
  void lm_head(std::span<const int64_t> rows, const TensorView& logits) const;
  // Rank r's replica of x and normed (tests: the replicas are bit-identical).
  const TensorView& x(size_t r) const { return x_[r]; }
  const TensorView& normed(size_t r) const { return normed_[r]; }

 private:
  // partials[r] from each rank's `run(rank, ctx, out)`, then every rank's outs[r] <- their sum.
  template <class Run>
  void reduce_ranks(std::span<const TensorView> outs, Run run) const;
  // fn(r) for each rank in order, with its memory's device current.
  template <class Fn>
  void on_each_rank(Fn fn) const;
  const TensorParallelShards& tp_;
  mutable std::vector<BatchContext> ctx_;                // per rank (the blocks take them mutable)
  std::vector<std::vector<std::vector<void*>>> tables_;  // [rank][span]: the rank's plane of each block
  std::vector<MemTensor> owned_;                         // ranks 1..N-1's replicas
  std::vector<TensorView> x_, normed_;                   // per rank
  bool one_memory_ = true;                               // every rank in one memory
};

// TargetModel::commit_many's DeltaNet part for every rank's layers, with the rank's ops and memory (its
// window copies done here, a copy_many a rank); `retired` as DeltaNetBlock::commit leaves it.
void tensor_parallel_commit(const TensorParallelShards& tp, std::span<const DeltaNetBlock::Commit> commits,
                            std::vector<Buffer>& retired);

}  // namespace specserve
