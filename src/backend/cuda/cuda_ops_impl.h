#pragma once
// Internal: CudaOps, the Ops of cuda_ops() (cuda_ops.h), and the helpers its ops share: the operand
// checks, the staging of KV rows and the bf16 copy of a producer's output that the next matmul may
// take (kernels.h: XbOut). The helpers and cuda_ops() are in cuda_ops.cpp; the ops are in
// cuda_ops_matmul.cpp, cuda_ops_elementwise.cpp, cuda_ops_attention.cpp and cuda_ops_gated_deltanet.cpp.
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/staging.h"
#include "backend/ops.h"

namespace specserve::cuda {

namespace k = kernels;

void on_device(const char* op, const TensorView& v);
void check_same(const char* op, const TensorView& a, const TensorView& b);
void check_matmul(const TensorView& x, const TensorView& w, const TensorView& y);
void check_norm(const char* op, const TensorView& x, const TensorView& y, const TensorView& w);

// The rows' block tables, deduplicated by host table (rows of one sequence share it), and the rows
// (staged, and their host copy).
struct StagedKv {
  k::KvArgs args;
  std::vector<k::KvRow> host_rows;
};

StagedKv stage_kv(cuda::Staging& staging, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows);

// The matmul order this thread asked for (Ops::set_matmul_order).
inline thread_local MatmulOrder t_matmul_order = MatmulOrder::RowInvariant;

// The XbOut for a producer's [M, K] output, or {} when no matmul of it would read one (the gemv kernel's
// rows, or under the free order the cuBLASLt path's).
k::XbOut xb_for(int64_t M, int64_t K);
// Right after the producer's launch: its output x [M, K] (row stride ldx) has the copy xb.
void note_xb(const void* x, int64_t ldx, int64_t M, int64_t K, const k::XbOut& xb);
// Right after the fp8 SwiGLU form: its output x [M, K] has the quantised copy xq (kernels.h: MatmulArgs::xq).
void note_fp8_activations(const void* x, int64_t ldx, int64_t M, int64_t K, const k::Fp8Activations& xq);
// A matmul's args take the noted copy (bf16 or quantised) when it is of their x.
void take_xb(k::MatmulArgs& a);

class CudaOps final : public Ops {
 public:
  std::string_view name() const override { return "cuda"; }
  MatmulOrder set_matmul_order(MatmulOrder order) const override { return std::exchange(t_matmul_order, order); }

  // --- cuda_ops_matmul.cpp ---
  void matmul(const TensorView& x, const TensorView& w, const TensorView& y) const override;
  bool matmul_accumulate(const TensorView& x, const TensorView& w, const TensorView& y) const override;
  static k::MatmulArgs matmul_args(const TensorView& x, const TensorView& w, const TensorView& y);
  void matmul_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys) const override;
  void matmul_prefill(const TensorView& x, const TensorView& w, const TensorView& y) const override;
  bool matmul_prefill_swiglu(const TensorView& x, const TensorView& gate, const TensorView& up,
                             const TensorView& out) const override;
  void matmul_multi_prefill(const TensorView& x, std::span<const TensorView> ws,
                            std::span<const TensorView> ys) const override;
  static void run_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys,
                        MatmulOrder order);

  // --- cuda_ops_elementwise.cpp ---
  void embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out) const override;
  void rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps, const TensorView& y) const override;
  void rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                      const TensorView& y) const override;
  void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta,
            std::span<const int32_t> positions) const override;
  void swiglu(const TensorView& gate, const TensorView& up, const TensorView& out) const override;
  void add(const TensorView& x, const TensorView& y) const override;
  void add_rms_norm(const TensorView& x, const TensorView& y, const TensorView& w, NormKind kind, float eps,
                    const TensorView& out) const override;
  void mul_sigmoid(const TensorView& x, const TensorView& gate) const override;
  void argmax(const TensorView& x, int64_t n, std::span<int32_t> out) const override;

  // --- cuda_ops_attention.cpp ---
  void kv_store(const TensorView& kt, const TensorView& v, const KvGeometry& geo, int layer,
                std::span<const AttentionRow> rows) const override;
  void qk_norm_rope_kv_store(const TensorView& q, const TensorView& kt, const TensorView& v, const QkPrep& prep,
                             const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) const override;
  void qk_norm_rope_kv_store_from(const TensorView& q_in, const TensorView& q_out, const TensorView& kt,
                                  const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                  std::span<const AttentionRow> rows) const override;
  void qk_norm_rope_kv_store_rows(const TensorView& q, std::span<const int32_t> q_positions, const TensorView& kt,
                                  const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                  std::span<const AttentionRow> kv_rows) const override;
  void head_prep(const TensorView& q_in, const TensorView& q, std::span<const int32_t> q_positions, bool q_at_kv_rows,
                 const TensorView& kt, const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                 std::span<const AttentionRow> rows) const;
  void attention_prefill(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                         int num_heads, float scale, const TensorView& out,
                         const TensorView* gate = nullptr) const override;
  void attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                 int num_heads, float scale, const TensorView& out) const override;

  // --- cuda_ops_gated_deltanet.cpp ---
  void causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w,
                        const TensorView& out) const override;
  void causal_conv_silu_spans(const TensorView& x, std::span<const ConvSpan> spans, const TensorView& w,
                              const TensorView& out) const override;
  void gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                   const TensorView& dt_bias, const GdnDims& dims) const override;
  void gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                        std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out) const override;
};

}  // namespace specserve::cuda
