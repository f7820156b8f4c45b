// cpu_ops(): the Ops interface over the CPU kernels.
#include "backend/cpu/cpu_ops.h"

namespace specserve {

namespace {
class CpuOps final : public Ops {
 public:
  std::string_view name() const override { return "cpu"; }
  void matmul(const TensorView& x, const TensorView& w, const TensorView& y) const override { cpu::matmul(x, w, y); }
  void matmul_multi(const TensorView& x, std::span<const TensorView> ws,
                    std::span<const TensorView> ys) const override {
    cpu::matmul_multi(x, ws, ys);
  }
  void embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out) const override {
    cpu::embedding(table, ids, out);
  }
  void rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps,
                const TensorView& y) const override {
    cpu::rms_norm(x, w, kind, eps, y);
  }
  void rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                      const TensorView& y) const override {
    cpu::rms_norm_gated(x, z, w, eps, y);
  }
  void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta,
            std::span<const int32_t> positions) const override {
    cpu::rope(x, heads, head_dim, rot_dim, theta, positions);
  }
  void swiglu(const TensorView& gate, const TensorView& up, const TensorView& out) const override {
    cpu::swiglu(gate, up, out);
  }
  void add(const TensorView& x, const TensorView& y) const override { cpu::add(x, y); }
  void mul_sigmoid(const TensorView& x, const TensorView& gate) const override { cpu::mul_sigmoid(x, gate); }
  void argmax(const TensorView& x, int64_t n, std::span<int32_t> out) const override { cpu::argmax(x, n, out); }
  void kv_store(const TensorView& k, const TensorView& v, const KvGeometry& geo, int layer,
                std::span<const AttentionRow> rows) const override {
    cpu::kv_store(k, v, geo, layer, rows);
  }
  // The copy, then the default preparation in place (the same bits by definition).
  void qk_norm_rope_kv_store_from(const TensorView& q_in, const TensorView& q_out, const TensorView& k,
                                  const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                  std::span<const AttentionRow> rows) const override {
    cpu::copy_heads(q_in, q_out, geo.head_dim);
    qk_norm_rope_kv_store(q_out, k, v, prep, geo, layer, rows);
  }
  void attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                 int num_heads, float scale, const TensorView& out) const override {
    cpu::attention(q, geo, layer, rows, num_heads, scale, out);
  }
  void causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w,
                        const TensorView& out) const override {
    cpu::causal_conv_silu(x, window, w, out);
  }
  void gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                   const TensorView& dt_bias, const GdnDims& dims) const override {
    cpu::gdn_prepare(qkv, a, b, a_log, dt_bias, dims);
  }
  void gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                        std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out) const override {
    cpu::gated_delta_rule(qkv, g, beta, spans, dims, out);
  }
};
}  // namespace

const Ops& cpu_ops() {
  static const CpuOps ops;
  return ops;
}

}  // namespace specserve
