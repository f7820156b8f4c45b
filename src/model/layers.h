#pragma once
// Internal: the shared building blocks of the target models (attention, Gated DeltaNet, MLP, the
// decoder layer) and the per-batch context they run in. Families (qwen3.cpp, qwen3_5.cpp) only say
// which blocks and norm flavours a layer uses and where its tensors are.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/memory.h"
#include "backend/ops.h"
#include "io/model_config.h"
#include "model/sequence_state.h"
#include "model/target_model.h"
#include "model/weights.h"

namespace specserve {

// What the blocks need to know about the architecture.
struct ArchSpec {
  NormKind norm = NormKind::Plain;  // layer norms, q/k norms and the final norm
  float eps = 1e-6f;
  int64_t hidden = 0, intermediate = 0, vocab = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, rot_dim = 0;
  double rope_theta = 10000.0;
  bool attn_output_gate = false;  // Qwen3.5: q_proj rows are [query | gate] per head
  GdnDims gdn;

  // The dimensions every family reads from its config, with the family's norm flavour and output gate.
  static ArchSpec from(const ModelConfig& cfg, NormKind norm, bool attn_output_gate) {
    ArchSpec s;
    s.norm = norm;
    s.eps = static_cast<float>(cfg.rms_norm_eps);
    s.hidden = cfg.hidden_size;
    s.intermediate = cfg.intermediate_size;
    s.vocab = cfg.vocab_size;
    s.num_heads = cfg.num_heads;
    s.num_kv_heads = cfg.num_kv_heads;
    s.head_dim = cfg.head_dim;
    s.rot_dim = cfg.rotary_dim();
    s.rope_theta = cfg.rope_theta;
    s.attn_output_gate = attn_output_gate;
    return s;
  }
};

// Access to SequenceState internals for the blocks and the model.
struct ModelInternals {
  using DeltaNetLayer = SequenceState::DeltaNetLayer;
  static DeltaNetLayer& deltanet(SequenceState& s, size_t i) { return s.deltanet_[i]; }
  static std::vector<DeltaNetLayer>& deltanets(SequenceState& s) { return s.deltanet_; }
  static std::vector<void*>& blocks(SequenceState& s) { return s.blocks_; }
  static int64_t& length(SequenceState& s) { return s.length_; }
  static int64_t& pending(SequenceState& s) { return s.pending_; }
  static void ensure_blocks(SequenceState& s, int64_t positions) { s.ensure_blocks(positions); }
  static void set_pool(SequenceState& s, std::shared_ptr<KvBlockPool> p) { s.pool_ = std::move(p); }
};

// The rows of one forward call.
struct BatchContext {
  struct Span {
    SequenceState* state;
    int64_t row_begin, rows, position;  // position of the first row
    SpanMode mode;
  };
  const Ops* ops = nullptr;
  const Memory* mem = nullptr;  // where activations and workspaces live (the ops' memory)
  const ArchSpec* spec = nullptr;
  KvGeometry kv;
  int64_t rows = 0;
  std::vector<Span> spans;
  std::vector<AttentionRow> attn_rows;  // per row
  // Maximal runs of consecutive rows of one kind: prefill rows (Prefill spans) or extend rows (decode and
  // verify). Each kind has its own kernels (docs/DESIGN.md §1.1–1.2): extend rows the row-invariant
  // ones, prefill rows the prefill matmul and attention, deterministic per sequence.
  struct RowRun {
    int64_t row_begin, rows;
    bool prefill;
  };
  std::vector<RowRun> runs;
  void build_runs();  // from spans

  // The block's ops over every run, each with its kind's op: y = x · wᵀ (and for several weights).
  void matmul(const TensorView& x, const TensorView& w, const TensorView& y) const;
  void matmul_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys) const;
  // With gate (the output gate, a head_rows.h view [rows, heads, hd]) out is multiplied by sigmoid(gate): by the
  // prefill kernel's epilogue in a prefill run, by Ops::mul_sigmoid after the others (the same bits).
  void attention(const TensorView& q, int layer, int num_heads, float scale, const TensorView& out,
                 const TensorView* gate = nullptr) const;
  // The SwiGLU MLP over every run, run after run: out = down(silu(x · gateᵀ) ⊙ (x · upᵀ)), with g and u
  // [rows, intermediate] as scratch (g holds the product). A prefill run takes Ops::matmul_prefill_swiglu
  // where the backend has it (the same bits).
  void swiglu_mlp(const TensorView& x, const TensorView& gate, const TensorView& up, const TensorView& down,
                  const TensorView& g, const TensorView& u, const TensorView& out) const;
};

// out[i] <- x[rows[i]] ([n, H] f32 rows), runs of consecutive rows in one copy_many (one launch on a device): the
// rows whose logits a forward computes.
void copy_logit_rows(const Memory& mem, const TensorView& x, std::span<const int64_t> rows, const TensorView& out);

struct AttentionBlock {
  TensorView q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  int slot = 0;  // index among the attention layers (KV cache layer)
  void forward(BatchContext& ctx, const TensorView& x, const TensorView& out) const;
};

struct DeltaNetBlock {
  TensorView in_qkv, in_z, in_b, in_a, out_proj;  // matrices
  TensorView conv, a_log, dt_bias, norm;          // f32: conv [conv_dim, Kc]
  int slot = 0;                                   // index among the DeltaNet layers
  void forward(BatchContext& ctx, const TensorView& x, const TensorView& out) const;
  // commit(n_i) of each sequence's pending extend (see sequence_state.h): full acceptances swap buffers,
  // the partial ones replay their kept rows in ONE gated_delta_rule call (their saved inputs gathered
  // first in one copy_many), each sequence a stepped span of its own, so its state is the bits a
  // replay alone gives. The window copies are appended to `copies` for the caller's one
  // Memory::copy_many; replaced buffers go to `retired` until then.
  struct Commit {
    SequenceState* state = nullptr;
    int64_t n = 0;
  };
  void commit(const Ops& ops, const Memory& mem, const ArchSpec& spec, std::span<const Commit> commits,
              std::vector<CopyRegion>& copies, std::vector<Buffer>& retired) const;
};

struct MlpBlock {
  TensorView gate, up, down;
  void forward(BatchContext& ctx, const TensorView& x, const TensorView& out) const;
};

struct DecoderLayer {
  LayerType type = LayerType::FullAttention;
  TensorView input_norm, post_norm;
  AttentionBlock attn;
  DeltaNetBlock deltanet;
  MlpBlock mlp;
  // x [rows, hidden] is updated in place: x += mixer(norm(x)); x += mlp(norm(x)). `normed` holds
  // input_norm(x) on entry; with `next_norm` (the next layer's input norm) it holds next_norm(x) on
  // return: the last residual add and the next layer's norm are one add_rms_norm call.
  void forward(BatchContext& ctx, const TensorView& x, const TensorView& normed, const TensorView* next_norm) const;
};

// Everything a family builder produces.
struct ModelParts {
  ArchSpec spec;
  std::vector<DecoderLayer> layers;
  TensorView embed, final_norm, lm_head;
};

// Every weight view of the parts (embedding, norms, head, every layer's matrices and vectors; null ones
// included), for uploads and relocations that rewrite them in place.
std::vector<TensorView*> weight_views(ModelParts& p);
// The bytes of the parts' weights, each tensor once (a tied head, a shared view), block scales included.
size_t distinct_weight_bytes(ModelParts p);

// Shared loaders (`i` is the decoder layer index).
AttentionBlock load_attention(WeightStore& w, const ArchSpec& spec, int i, int slot);
DeltaNetBlock load_deltanet(WeightStore& w, const ArchSpec& spec, int i, int slot);
MlpBlock load_mlp(WeightStore& w, const ArchSpec& spec, int i);
// Embedding, final norm and lm_head (top-level `lm_head.weight`, or the embedding when tied/absent).
void load_head(WeightStore& w, const ModelConfig& cfg, ModelParts& parts);

// Families.
ModelParts build_qwen3(const ModelConfig& cfg, WeightStore& w);
ModelParts build_qwen3_5(const ModelConfig& cfg, WeightStore& w);

}  // namespace specserve
