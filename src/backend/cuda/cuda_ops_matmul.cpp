// CudaOps' matmuls (ops.h): the row-invariant, prefill and free-order choices (backend/matmul_choice.h),
// single, multi-weight and the prefill GEMM with its SwiGLU epilogue.
#include <vector>

#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/matmul_free_order.h"
#include "backend/cuda/step_graphs.h"
#include "backend/matmul_choice.h"
#include "core/error.h"

namespace specserve::cuda {

void CudaOps::matmul(const TensorView& x, const TensorView& w, const TensorView& y) const {
  check_matmul(x, w, y);
  const k::MatmulArgs a = matmul_args(x, w, y);
  k::matmul_run(&a, 1, t_matmul_order, cuda::launch_stream());
}

bool CudaOps::matmul_accumulate(const TensorView& x, const TensorView& w, const TensorView& y) const {
  check_matmul(x, w, y);
  const k::MatmulArgs a = matmul_args(x, w, y);
  // Only the free-order GEMM adds in its epilogue (ops.h); any other choice: the caller adds.
  if (choose_matmul(MatmulBackend::Cuda, t_matmul_order, a.M, a.K, k::matmul_weight(a), k::matmul_device()) !=
      MatmulKernel::FreeOrder)
    return false;
  return cuda::matmul_free_order({&a, 1}, /*accumulate=*/true);
}

k::MatmulArgs CudaOps::matmul_args(const TensorView& x, const TensorView& w, const TensorView& y) {
  k::MatmulArgs a;
  a.x = x.as<const float>();
  a.ldx = x.strides[0];
  a.w = w.data;
  a.w_bf16 = w.dtype == DType::BF16;
  a.ldw = w.strides[0];
  if (w.block_scaled()) {  // fp8 codes and their scales (kernels.h)
    a.w_scales = w.scales;
    a.scale_ld = w.scale_shape()[1];
  }
  a.y = y.as<float>();
  a.ldy = y.strides[0];
  a.M = x.dim(0);
  a.N = w.dim(0);
  a.K = x.dim(1);
  take_xb(a);
  return a;
}

// The weights that share a launch share it (backend/matmul_choice.h: plan_matmul); the bits are
// those of one matmul per weight either way.
void CudaOps::matmul_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys) const {
  run_multi(x, ws, ys, t_matmul_order);
}

void CudaOps::matmul_prefill(const TensorView& x, const TensorView& w, const TensorView& y) const {
  check_matmul(x, w, y);
  const k::MatmulArgs a = matmul_args(x, w, y);
  k::matmul_run(&a, 1, MatmulOrder::Prefill, cuda::launch_stream());
}

bool CudaOps::matmul_prefill_swiglu(const TensorView& x, const TensorView& gate, const TensorView& up,
                                    const TensorView& out) const {
  check_matmul(x, gate, out);
  check_matmul(x, up, out);
  const k::MatmulArgs g = matmul_args(x, gate, out), u = matmul_args(x, up, out);
  // Only where the choice gives both weights the prefill GEMM, or both the W8A8 GEMM (backend/matmul_choice.h).
  const auto kernel = [](const k::MatmulArgs& a) {
    return choose_matmul(MatmulBackend::Cuda, MatmulOrder::Prefill, a.M, a.K, k::matmul_weight(a), k::matmul_device());
  };
  const MatmulKernel kg = kernel(g), ku = kernel(u);
  if (kg == MatmulKernel::Fp8Prefill && ku == MatmulKernel::Fp8Prefill) {
    k::Fp8Activations hq;
    if (!k::matmul_fp8_prefill_swiglu(g, u, &hq, cuda::launch_stream())) return false;
    note_fp8_activations(out.data, out.strides[0], out.dim(0), out.dim(1), hq);
    return true;
  }
  if (kg != MatmulKernel::Prefill || ku != MatmulKernel::Prefill) return false;
  const k::XbOut xb = k::matmul_xb_out_beside_x(out.dim(0), out.dim(1), cuda::launch_stream());
  if (!k::matmul_bf16_prefill_swiglu(g, u, xb, cuda::launch_stream())) return false;
  note_xb(out.data, out.strides[0], out.dim(0), out.dim(1), xb);
  return true;
}

void CudaOps::matmul_multi_prefill(const TensorView& x, std::span<const TensorView> ws,
                                   std::span<const TensorView> ys) const {
  run_multi(x, ws, ys, MatmulOrder::Prefill);
}

void CudaOps::run_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys,
                        MatmulOrder order) {
  SS_CHECK(ws.size() == ys.size(), "matmul_multi: {} weights but {} outputs", ws.size(), ys.size());
  for (size_t i = 0; i < ws.size(); ++i) check_matmul(x, ws[i], ys[i]);
  std::vector<k::MatmulArgs> args;
  for (size_t i = 0; i < ws.size(); ++i) args.push_back(matmul_args(x, ws[i], ys[i]));
  k::matmul_run(args.data(), static_cast<int>(args.size()), order, cuda::launch_stream());
}

}  // namespace specserve::cuda
