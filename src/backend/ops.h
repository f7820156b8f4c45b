#pragma once
// The op interface the models are written against (docs/DESIGN.md §2: "backend/ one op interface; cpu/ and
// cuda/ implement it"). Every op works on TensorViews of f32 activations laid out row-major as
// [rows, features]; weights may be f32 or bf16 where noted.
//
// The contract that matters most is ROW INVARIANCE (docs/DESIGN.md §1): the bits of one row's result depend
// only on that row's inputs (and, for attention and Gated DeltaNet, on its own sequence's cached
// state), never on how many rows are in the call or which other rows are present. Verify rows are
// therefore computed exactly as decode rows, which is what makes speculative decoding lossless.
#include <cstdint>
#include <span>
#include <string_view>

#include "backend/matmul_order.h"
#include "core/tensor.h"

namespace specserve {

// RMSNorm flavours (docs/MODELS.md §1.1).
enum class NormKind {
  Plain,        // y = w * (x * rsqrt(mean(x^2) + eps))           Qwen3, drafter
  ZeroCentred,  // y = (x * rsqrt(mean(x^2) + eps)) * (1 + w)     Qwen3.5/3.6
};

// ---- paged KV cache -----------------------------------------------------------------------------

inline constexpr int kKvBlockSize = 16;

// Geometry of one KV block: kKvBlockSize consecutive positions of one sequence for every attention
// layer, laid out [layer][K|V][kv_head][slot][head_dim] in `dtype` (a key is contiguous over head_dim;
// a head's keys are contiguous over slots, which is what the score loop walks). The element type is
// F32 or BF16 (docs/DESIGN.md §1.1: a bf16 cache stores k and v rounded to nearest even and its
// readers widen them exactly, so every kernel gives with a bf16 cache the bits it gives with an f32
// cache holding the rounded values). Sizes and offsets count elements unless they say bytes; a block
// is an untyped pointer that a kernel reads as `dtype`.
struct KvGeometry {
  int num_layers = 0;  // attention layers only
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::F32;  // F32 or BF16

  bool bf16() const { return dtype == DType::BF16; }
  int64_t elem_bytes() const { return bf16() ? 2 : 4; }
  int64_t head_elems() const { return int64_t{kKvBlockSize} * head_dim; }
  int64_t layer_elems() const { return 2 * num_kv_heads * head_elems(); }
  int64_t block_elems() const { return num_layers * layer_elems(); }
  int64_t block_bytes() const { return block_elems() * elem_bytes(); }
  // Offset of K (which = 0) or V (which = 1) of (layer, kv head, slot) inside a block, in elements.
  int64_t offset(int layer, int which, int head, int slot) const {
    return layer * layer_elems() + (int64_t{which} * num_kv_heads + head) * head_elems() + int64_t{slot} * head_dim;
  }
  // The head_dim elements of that (layer, K|V, kv head, slot) in `block`, as T (float or uint16_t bf16
  // bits, whichever dtype says).
  template <class T>
  T* at(void* block, int layer, int which, int head, int slot) const {
    return static_cast<T*>(block) + offset(layer, which, head, slot);
  }
  // The same place as an untyped pointer (the element type is dtype).
  void* locate(void* block, int layer, int which, int head, int slot) const {
    return static_cast<char*>(block) + offset(layer, which, head, slot) * elem_bytes();
  }
};

// The KV dtype a model's cache takes for the `--kv-dtype` choice ("auto", "bf16" or "f32"): auto is
// f32 when the model's weights are f32 (the `--dtype f32` parity runs) and bf16 otherwise. Throws on
// any other spelling.
DType resolve_kv_dtype(std::string_view choice, DType weight_dtype);

// One query row of an attention call: the row's sequence's block table (block i holds positions
// [16i, 16i+16)) and the row's own position. The row attends to positions 0..position inclusive, so
// K rows of an extend see exactly what K successive decode steps would see.
struct AttentionRow {
  void* const* blocks = nullptr;
  int32_t position = 0;
  // First position the row attends to (default 0: from the start). Sliding-window layers (e.g. the
  // DFlash drafter's, docs/DFLASH.md §1.7) set position - (window - 1); kv_store ignores it.
  int32_t window_start = 0;
};

// The per-head preparation of q and k before attention (Ops::qk_norm_rope_kv_store).
struct QkPrep {
  TensorView q_norm, k_norm;  // [head_dim] each
  NormKind norm = NormKind::Plain;
  float eps = 1e-6f;
  int rot_dim = 0;  // RoPE on the first rot_dim dims of each head
  double theta = 0;
};

// ---- Gated DeltaNet -------------------------------------------------------------------------------

struct GdnDims {
  int num_k_heads = 0;  // Hk
  int num_v_heads = 0;  // Hv (a multiple of Hk; value head h reads q/k head h / (Hv/Hk))
  int k_dim = 0;        // dk
  int v_dim = 0;        // dv
  int conv_kernel = 4;  // Kc
  int key_dim() const { return num_k_heads * k_dim; }
  int value_dim() const { return num_v_heads * v_dim; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t state_floats() const { return int64_t{num_v_heads} * k_dim * v_dim; }
};

// One sequence's rows inside a Gated DeltaNet call.
struct GdnSpan {
  float* state = nullptr;  // [Hv, dk, dv] f32, updated in place
  int64_t row_begin = 0;   // first row of the span in the call's row tensors
  int64_t rows = 0;
  int64_t position = 0;  // absolute position of the first row (chunk alignment, prefill only)
  bool chunked = false;  // prefill: chunked form; otherwise stepped token by token
  // Stepped spans only: when set, the first step reads the state from here and every write goes to
  // `state` (so an extend can run on top of a committed state without copying it first).
  const float* state_in = nullptr;
};

inline constexpr int kGdnChunk = 64;

// One sequence's rows in Ops::causal_conv_silu_spans, with that sequence's conv window [Kc-1, C].
struct ConvSpan {
  TensorView window;
  int64_t row_begin = 0;
  int64_t rows = 0;
};

// How a matmul may order its sums along K. RowInvariant is the contract above, for everything whose
// bits reach the output (the target's forward). Free lets a backend pick any order, e.g. a vendor GEMM
// whose split of K depends on the shape and so on the rows in the call: for work whose result only
// steers speed, never the output — the DFlash drafter's forward, whose drafts the target verifies
// (docs/DESIGN.md §1: acceptance is sample-match, so a different draft changes acceptance, not tokens).
// The enum is in backend/matmul_order.h: MatmulOrder::RowInvariant, MatmulOrder::Free.

// Per-thread state. One Ops object serves every thread, and its ops take all their operands as
// arguments, except two things a backend keeps per calling thread:
//   - the matmul order (set_matmul_order below): MatmulOrder::RowInvariant unless the thread set Free
//     (the DFlash drafter's forward, through ScopedMatmulOrder); it steers matmul, matmul_multi,
//     matmul_accumulate and, on CUDA, attention. Which kernel each order gives: backend/matmul_choice.h.
//   - on CUDA, x's bf16 copy: rms_norm, add_rms_norm, swiglu and attention write their [M, K] output
//     rounded to bf16 beside it when the matmul that reads it next would convert it (the gemv kernel's
//     5-32 rows, or the free-order GEMM), and the next matmul on the same thread reads that copy instead,
//     only if its x is exactly that output and nothing was enqueued on any stream in between
//     (cuda_ops.cpp: XbNote). The copy is the same rounding the matmul would do, so the bits are the
//     same either way: a caller never needs to know, but the producer-then-matmul pairing on one thread
//     is what saves the conversion.
class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string_view name() const = 0;

  // Sets the order of the matmuls (matmul, matmul_multi) this thread issues from now on and returns
  // the previous one (ScopedMatmulOrder below). A backend without a faster free-order path keeps the
  // fixed order and ignores it (the CPU); a free-order call that does not qualify for the faster path
  // (f32 weights, few rows, unaligned operands) runs in the fixed order too. The CUDA backend's
  // attention follows the order as well: under Free, a sequence's rows share one tensor-core kernel's
  // tiles (a drafter block's rows).
  virtual MatmulOrder set_matmul_order(MatmulOrder order) const {
    (void)order;
    return MatmulOrder::RowInvariant;
  }

  // y[M, N] = x[M, K] · w[N, K]ᵀ. x, y f32; w f32 or bf16; accumulation f32. The reduction order of
  // each output element along K is fixed (independent of M, of the thread count and of the columns
  // around it).
  // w may also be a block-scaled fp8 matrix (F8_E4M3 with TensorView::scales: `--fp8-weights keep`,
  // docs/MODELS.md §6.1). Its contract: every weight element is dequantised to bf16 as
  // bf16_rn(f32_rn(e4m3(w[n, k]) × scales[n / 128, k / 128])) — exactly the bf16 matrix that
  // io/fp8_blocks.h dequantize_fp8_blocks(w, scales, BF16) stores at load — and y has, bit for bit, the bits
  // of this call with that bf16 matrix, on every backend, for matmul, matmul_multi and the prefill ops
  // (under MatmulOrder::Free it is as free as with bf16). The dequantisation happens in registers or in a
  // scratch, per call; rows stay invariant because the bf16 kernels' rows are. One exception: the CUDA backend's
  // prefill ops on sm_90a run fp8 weights as W8A8 (x quantised to e4m3 per row and 128 columns, fp8 tensor
  // cores: cuda/matmul_prefill_fp8_sm90a.cu), as the peers do — deterministic per row like every prefill
  // matmul, but not the dequantisation's bits (kernels::set_matmul_fp8_w8a8(false) restores them).
  virtual void matmul(const TensorView& x, const TensorView& w, const TensorView& y) const = 0;
  // Several matmuls sharing x in one parallel pass (q/k/v, gate/up): ys[i] = x · ws[i]ᵀ.
  virtual void matmul_multi(const TensorView& x, std::span<const TensorView> ws,
                            std::span<const TensorView> ys) const = 0;
  // The prefill rows' matmul (docs/DESIGN.md §1.2): y = x · wᵀ, deterministic per row — a row's bits
  // depend only on its own x row and on w (and on w's shape: N, K), never on M, on the other rows or on
  // the call's split into launches — but they need not equal matmul()'s. The CUDA backend runs it on a
  // Hopper GEMM with one accumulation chain along K per element; the default is matmul().
  virtual void matmul_prefill(const TensorView& x, const TensorView& w, const TensorView& y) const { matmul(x, w, y); }
  // matmul_prefill for several weights sharing x (q/k/v, gate/up); the default is matmul_multi().
  virtual void matmul_multi_prefill(const TensorView& x, std::span<const TensorView> ws,
                                    std::span<const TensorView> ys) const {
    matmul_multi(x, ws, ys);
  }
  // An MLP's prefill rows in one pass where the backend has one: out = silu(x · gateᵀ) ⊙ (x · upᵀ) with the
  // bits of matmul_multi_prefill({gate, up}) then swiglu (the CUDA backend on sm_90a: the prefill GEMM's
  // SwiGLU form, which also writes out's bf16 copy for the down projection). Returns false having done
  // nothing otherwise (the default); the caller then runs those two.
  virtual bool matmul_prefill_swiglu(const TensorView& x, const TensorView& gate, const TensorView& up,
                                     const TensorView& out) const {
    (void)x, (void)gate, (void)up, (void)out;
    return false;
  }
  // y += x · wᵀ in one pass, where the backend has one: the CUDA backend under MatmulOrder::Free (a
  // cuBLASLt GEMM whose epilogue adds y, as the drafter's residual adds do). Returns false having done
  // nothing otherwise; the caller then runs matmul() into a scratch and add().
  virtual bool matmul_accumulate(const TensorView& x, const TensorView& w, const TensorView& y) const {
    (void)x, (void)w, (void)y;
    return false;
  }

  // out[r, :] = table[ids[r], :] (table f32 or bf16).
  virtual void embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out) const = 0;

  // RMSNorm over the last dim of x viewed as [n, d] (d = w's length); y may alias x.
  virtual void rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps,
                        const TensorView& y) const = 0;
  // Gated RMSNorm (DeltaNet output): y = (w * norm(x)) * silu(z), over groups of d = w's length.
  virtual void rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                              const TensorView& y) const = 0;

  // Rotate-half RoPE in place on x [R, heads * head_dim]: the first rot_dim dims of each head rotate
  // by position[r] * theta^(-2i/rot_dim); the rest pass through.
  virtual void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta,
                    std::span<const int32_t> positions) const = 0;

  // out = silu(gate) * up, elementwise (out may alias gate).
  virtual void swiglu(const TensorView& gate, const TensorView& up, const TensorView& out) const = 0;
  // out[r] = the lowest index of the maximum of row r of x [R, >= n] over its first n entries, with
  // NaN read as -inf and +inf as FLT_MAX (the sampler's sanitising, sampling/sampler.h), or -1 when no
  // entry is finite. `out` is host memory (R entries): the ids cross to the host, the rows need not.
  virtual void argmax(const TensorView& x, int64_t n, std::span<int32_t> out) const = 0;
  // x += y, elementwise.
  virtual void add(const TensorView& x, const TensorView& y) const = 0;
  // x += y, then out = rms_norm(x) (the residual add and the next norm of a decoder layer): the bits of
  // add() then rms_norm(); the default calls them, a device fuses them into one launch.
  virtual void add_rms_norm(const TensorView& x, const TensorView& y, const TensorView& w, NormKind kind, float eps,
                            const TensorView& out) const;
  // x *= sigmoid(gate), elementwise. gate is contiguous like x, or x is [R, heads * hd] (contiguous) and
  // gate a [R, heads, hd] view with any row and head strides (head_rows.h: Qwen3.5's gates read in place
  // from the q_proj output); the bits are those of mul_sigmoid on a contiguous copy of the gate.
  virtual void mul_sigmoid(const TensorView& x, const TensorView& gate) const = 0;

  // Writes k, v [R, nkv * hd] into the cache at each row's position.
  virtual void kv_store(const TensorView& k, const TensorView& v, const KvGeometry& geo, int layer,
                        std::span<const AttentionRow> rows) const = 0;
  // The attention block's per-head preparation of q [R, num_heads * hd] and k, v [R, nkv * hd]
  // (hd = geo.head_dim, nkv = geo.num_kv_heads): RMSNorm of every head of q and of k (weights
  // prep.q_norm / prep.k_norm, hd long), RoPE on both at each row's position (rows[r].position), then
  // kv_store(k, v). q and k are updated in place. The bits of rms_norm(q); rms_norm(k); rope(q);
  // rope(k); kv_store(k, v, ...): the default calls them, a device does it in one launch.
  virtual void qk_norm_rope_kv_store(const TensorView& q, const TensorView& k, const TensorView& v, const QkPrep& prep,
                                     const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) const;
  // The same when q's rows are not k's (the DFlash drafter: its queries are the block's rows, its keys
  // and values the new context rows and the block's): q [Rq, num_heads * hd] rotated at q_positions[r]
  // (Rq may be 0), k and v [Rk, nkv * hd] at kv_rows[r].position and stored there. The bits of
  // rms_norm(q); rms_norm(k); rope(q, q_positions); rope(k, the kv positions); kv_store(k, v, ...).
  // qk_norm_rope_kv_store with q read from q_in and the prepared q written to q_out [R, num_heads * hd]
  // (contiguous rows; q_in is left as it was unless it is q_out). q_in is 2-D like q_out or a
  // [R, num_heads, hd] view with any row and head strides (head_rows.h: Qwen3.5's queries inside its
  // [query | gate] heads). The bits of copying q_in into q_out, then qk_norm_rope_kv_store(q_out, ...).
  virtual void qk_norm_rope_kv_store_from(const TensorView& q_in, const TensorView& q_out, const TensorView& k,
                                          const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                          std::span<const AttentionRow> rows) const = 0;
  virtual void qk_norm_rope_kv_store_rows(const TensorView& q, std::span<const int32_t> q_positions,
                                          const TensorView& k, const TensorView& v, const QkPrep& prep,
                                          const KvGeometry& geo, int layer,
                                          std::span<const AttentionRow> kv_rows) const;
  // Causal GQA attention: out[r] = softmax(q[r] · K[w..pos]ᵀ * scale) V[w..pos] with w = the row's
  // window_start (0 unless windowed), per query head h using KV head h / (num_heads / nkv).
  // q, out: [R, num_heads * hd]. Softmax in f32.
  virtual void attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                         int num_heads, float scale, const TensorView& out) const = 0;
  // attention() for prefill rows (docs/DESIGN.md §1.2): every row has window_start 0, and a row's bits
  // depend only on its sequence's keys and values at positions 0..its own and on its own query — never
  // on the other rows of the call or on where its prompt was cut into chunks — but need not equal
  // attention()'s. The CUDA backend runs a flash-attention kernel on tensor cores that walks key blocks
  // of 64 from position 0; the default is attention(). With `gate` (Qwen3.5/3.6's output gate: [R, num_heads
  // * hd] or a head_rows.h view) out is then multiplied by sigmoid(gate), with the bits of mul_sigmoid(out,
  // *gate) after the ungated call: the CUDA kernels apply it in their epilogue.
  virtual void attention_prefill(const TensorView& q, const KvGeometry& geo, int layer,
                                 std::span<const AttentionRow> rows, int num_heads, float scale, const TensorView& out,
                                 const TensorView* gate = nullptr) const {
    attention(q, geo, layer, rows, num_heads, scale, out);
    if (gate != nullptr) mul_sigmoid(out, *gate);
  }

  // Causal depthwise conv + SiLU over one span: x [n, C] pre-conv rows, window [Kc-1, C] the rows
  // before x (oldest first), w [C, Kc] (w[c, Kc-1] multiplies the current row). out [n, C].
  virtual void causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w,
                                const TensorView& out) const = 0;
  // causal_conv_silu over several spans of x's rows (one per sequence), each with its own window; a
  // span's bits are those of causal_conv_silu over it alone. The default calls it per span; a device
  // does all spans in one launch.
  virtual void causal_conv_silu_spans(const TensorView& x, std::span<const ConvSpan> spans, const TensorView& w,
                                      const TensorView& out) const;
  // In place on rows [R, conv_dim] (post-conv q|k|v): L2-normalises q and k per head (eps 1e-6 on the
  // sum of squares) and scales q by dk^-0.5. From a, b [R, Hv]: beta = sigmoid(b) written to b,
  // g = -exp(A_log) * softplus(a + dt_bias) written to a. All f32.
  virtual void gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                           const TensorView& dt_bias, const GdnDims& dims) const = 0;
  // The gated delta rule over each span (state in place). qkv [R, conv_dim] prepared as above,
  // g / beta [R, Hv], out [R, Hv * dv]. Stepped spans run the recurrence token by token; chunked spans
  // use the chunked form with chunks aligned to absolute positions that are multiples of kGdnChunk
  // (so chunk boundaries depend only on the sequence).
  virtual void gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                                std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out) const = 0;
};

// Sets `ops`' matmul order on this thread for the scope's life, then restores the previous one.
class ScopedMatmulOrder {
 public:
  ScopedMatmulOrder(const Ops& ops, MatmulOrder order) : ops_(ops), previous_(ops.set_matmul_order(order)) {}
  ~ScopedMatmulOrder() { ops_.set_matmul_order(previous_); }
  ScopedMatmulOrder(const ScopedMatmulOrder&) = delete;
  ScopedMatmulOrder& operator=(const ScopedMatmulOrder&) = delete;

 private:
  const Ops& ops_;
  MatmulOrder previous_;
};

// The CPU implementation (AVX2 baseline; AVX-512 matmul where the CPU has it).
const Ops& cpu_ops();

}  // namespace specserve
