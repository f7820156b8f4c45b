// CudaOps' row and element ops: embedding, the RMS norms (plain, gated, fused with an add), RoPE,
// SwiGLU, add, the sigmoid gate and argmax.
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/staging.h"
#include "backend/cuda/step_graphs.h"
#include "backend/head_rows.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specserve::cuda {

void CudaOps::embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out) const {
  on_device("embedding", table);
  on_device("embedding", out);
  SS_CHECK(table.ndim() == 2 && table.is_contiguous() && (table.dtype == DType::F32 || table.dtype == DType::BF16),
           "embedding: table {} must be a contiguous f32/bf16 matrix", table.describe());
  SS_CHECK(out.dtype == DType::F32 && out.ndim() == 2 && out.is_contiguous() && out.dim(1) == table.dim(1) &&
               out.dim(0) == static_cast<int64_t>(ids.size()),
           "embedding: output {} for {} ids of width {}", out.describe(), ids.size(), table.dim(1));
  for (int32_t id : ids)
    SS_CHECK(id >= 0 && id < table.dim(0), "token id {} outside the vocabulary [0, {})", id, table.dim(0));
  if (ids.empty()) return;
  auto& staging = cuda::Staging::global();
  auto lock = staging.lock();
  const auto* d_ids = static_cast<const int32_t*>(staging.stage(ids.data(), ids.size_bytes()));
  k::embedding(table.data, table.dtype == DType::BF16, table.dim(1), d_ids, static_cast<int64_t>(ids.size()),
               out.as<float>(), cuda::launch_stream());
}

void CudaOps::rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps, const TensorView& y) const {
  check_norm("rms_norm", x, y, w);
  const int64_t d = w.numel(), groups = x.numel() / d;
  const k::XbOut xb = xb_for(groups, d);
  k::rms_norm(x.as<const float>(), w.as<const float>(), y.as<float>(), groups, d, kind == NormKind::Plain ? 0 : 1, eps,
              cuda::launch_stream(), xb);
  note_xb(y.data, d, groups, d, xb);
}

void CudaOps::rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                             const TensorView& y) const {
  check_norm("rms_norm_gated", x, y, w);
  on_device("rms_norm_gated", z);
  SS_CHECK(z.dtype == DType::F32 && z.is_contiguous() && z.numel() == x.numel(), "rms_norm_gated: gate {} vs x {}",
           z.describe(), x.describe());
  const int64_t d = w.numel();
  k::rms_norm_gated(x.as<const float>(), z.as<const float>(), w.as<const float>(), y.as<float>(), x.numel() / d, d, eps,
                    cuda::launch_stream());
}

void CudaOps::rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta,
                   std::span<const int32_t> positions) const {
  on_device("rope", x);
  check_rope_operands(x, heads, head_dim, rot_dim, positions.size());
  if (positions.empty()) return;
  const std::vector<float> inv_freq = rope_inv_freq(theta, rot_dim);  // the CPU's exact f32 angles
  cuda::StagingBlob blob;
  const size_t off_f = blob.append(inv_freq.data(), inv_freq.size());
  const size_t off_p = blob.append(positions.data(), positions.size());
  auto& staging = cuda::Staging::global();
  auto lock = staging.lock();
  auto* base = static_cast<char*>(staging.stage(blob.data(), blob.size()));
  k::rope(x.as<float>(), x.dim(0), x.strides[0], heads, head_dim, rot_dim, reinterpret_cast<const float*>(base + off_f),
          reinterpret_cast<const int32_t*>(base + off_p), cuda::launch_stream());
}

void CudaOps::swiglu(const TensorView& gate, const TensorView& up, const TensorView& out) const {
  check_same("swiglu", gate, up);
  check_same("swiglu", gate, out);
  const k::XbOut xb = out.ndim() == 2 ? xb_for(out.dim(0), out.dim(1)) : k::XbOut{};
  if (xb.regs == nullptr)
    return k::swiglu(gate.as<const float>(), up.as<const float>(), out.as<float>(), gate.numel(),
                     cuda::launch_stream());
  k::swiglu_xb(gate.as<const float>(), up.as<const float>(), out.as<float>(), out.dim(0), out.dim(1), xb,
               cuda::launch_stream());
  note_xb(out.data, out.dim(1), out.dim(0), out.dim(1), xb);
}

void CudaOps::add(const TensorView& x, const TensorView& y) const {
  check_same("add", x, y);
  k::add(x.as<float>(), y.as<const float>(), x.numel(), cuda::launch_stream());
}

void CudaOps::add_rms_norm(const TensorView& x, const TensorView& y, const TensorView& w, NormKind kind, float eps,
                           const TensorView& out) const {
  check_same("add_rms_norm", x, y);
  check_norm("add_rms_norm", x, out, w);
  SS_CHECK(out.data != x.data && out.data != y.data, "add_rms_norm: out must not alias x or y");
  const int64_t d = w.numel(), groups = x.numel() / d;
  const k::XbOut xb = xb_for(groups, d);
  k::add_rms_norm(x.as<float>(), y.as<const float>(), w.as<const float>(), out.as<float>(), groups, d,
                  kind == NormKind::Plain ? 0 : 1, eps, cuda::launch_stream(), xb);
  note_xb(out.data, d, groups, d, xb);
}

void CudaOps::mul_sigmoid(const TensorView& x, const TensorView& gate) const {
  if (gate.ndim() == 3) {  // heads read in place (head_rows.h)
    on_device("mul_sigmoid", x);
    on_device("mul_sigmoid", gate);
    SS_CHECK(x.dtype == DType::F32 && x.ndim() == 2 && x.is_contiguous(),
             "mul_sigmoid: x {} must be contiguous f32 rows for the gate {}", x.describe(), gate.describe());
    const HeadRows g =
        check_head_rows("mul_sigmoid", gate, static_cast<int>(gate.dim(1)), static_cast<int>(gate.dim(2)));
    SS_CHECK(x.dim(0) == g.rows && x.dim(1) == int64_t{g.heads} * g.head_dim, "mul_sigmoid: x {} vs gate {}",
             x.describe(), gate.describe());
    k::mul_sigmoid_heads(x.as<float>(), gate.as<const float>(), g.rows, g.heads, g.head_dim, g.ld, g.head_stride,
                         cuda::launch_stream());
    return;
  }
  check_same("mul_sigmoid", x, gate);
  k::mul_sigmoid(x.as<float>(), gate.as<const float>(), x.numel(), cuda::launch_stream());
}

void CudaOps::argmax(const TensorView& x, int64_t n, std::span<int32_t> out) const {
  on_device("argmax", x);
  check_argmax_operands(x, n, out.size());
  if (out.empty()) return;
  const Memory& mem = cuda_memory();
  Buffer ids(mem, out.size_bytes());
  Buffer scratch(mem, static_cast<size_t>(k::argmax_scratch_bytes(x.dim(0), n)));
  k::argmax(x.as<const float>(), x.strides[0], x.dim(0), n, static_cast<int32_t*>(ids.data()), scratch.data(),
            cuda::launch_stream());
  mem.download(out.data(), ids.data(), out.size_bytes());
}

}  // namespace specserve::cuda
