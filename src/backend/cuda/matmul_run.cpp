// Runs a matmul as backend/matmul_choice.h plans it: the one place where a CUDA matmul's kernel is
// chosen (Ops::matmul, Ops::matmul_multi and kernels::matmul all come here).
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_free_order.h"
#include "backend/cuda/matmul_wgmma_tma.h"
#include "backend/matmul_choice.h"
#include "core/error.h"

namespace specserve::cuda::kernels {

namespace {

MatmulPlan plan_of(const MatmulArgs* parts, int count, MatmulOrder order) {
  MatmulCall call;
  call.backend = MatmulBackend::Cuda;
  call.order = order;
  call.M = parts[0].M;
  call.K = parts[0].K;
  call.device = matmul_device();
  call.weights.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) call.weights.push_back(matmul_weight(parts[i]));
  return plan_matmul(call);
}

// Launches `kernel` over the n parts g[0 .. n) (several only for Mid and Gemv).
void run_launch(MatmulKernel kernel, const MatmulArgs* g, int n, cudaStream_t stream) {
  switch (kernel) {
    case MatmulKernel::Empty: return;
    case MatmulKernel::ZeroFill: return matmul_zero(g[0], stream);
    case MatmulKernel::CudaCoreF32: return matmul_f32(g[0], stream);
    case MatmulKernel::Mid:
      SS_CHECK(matmul_bf16_mid(g, n, stream), "matmul: the 17-64-row kernel declined a call the choice gave it");
      return;
    case MatmulKernel::Gemv:
      if (n > 1) return matmul_bf16_gemv_multi(g, n, stream);
      return matmul_bf16_gemv(g[0], stream);
    case MatmulKernel::Wgmma:
    case MatmulKernel::WgmmaSerial:
      // (matmul_bf16_wgmma picks the slice-serial kernel by matmul_wgmma_serial, the rule that chose it.)
      SS_CHECK(matmul_bf16_wgmma(g[0], stream), "matmul: the wgmma kernel cannot run on this device");
      return;
    case MatmulKernel::WgmmaTma:
      SS_CHECK(matmul_bf16_wgmma_tma(g, n, stream), "matmul: the wgmma-tma kernel declined a call the choice gave it");
      return;
    case MatmulKernel::Tiled: return matmul_bf16_tiled(g[0], stream);
    case MatmulKernel::Prefill:
      SS_CHECK(matmul_bf16_prefill(g, n, stream), "matmul: the prefill GEMM declined a call the choice gave it");
      return;
    case MatmulKernel::Fp8Gemv: return matmul_fp8_gemv_multi(g, n, stream);
    case MatmulKernel::Fp8Prefill:
      SS_CHECK(matmul_fp8_prefill(g, n, stream), "matmul: the fp8 prefill GEMM declined a call the choice gave it");
      return;
    case MatmulKernel::Fp8Dequant: break;  // (needs the order: matmul_run calls it)
    case MatmulKernel::FreeOrder:
    case MatmulKernel::Cpu: break;
  }
  fail("matmul: kernel {} is not the CUDA backend's to run here", matmul_kernel_name(kernel));
}

}  // namespace

void matmul_run(const MatmulArgs* parts, int count, MatmulOrder order, cudaStream_t stream) {
  if (count < 1) return;
  bool any_fp8 = false;
  for (int i = 0; i < count; ++i) any_fp8 = any_fp8 || parts[i].w_scales != nullptr;
  if (count > 1 && any_fp8) {  // plan_matmul: fp8 gemv groups share a launch; the other weights are one call
    const MatmulPlan plan = plan_of(parts, count, order);
    std::vector<MatmulArgs> g;
    for (size_t l = 0; l < plan.launches.size(); ++l) {
      // Only the first launch reads x's producer copy: a later one's kernel may find it overwritten by an
      // earlier call's own conversion of x (in another layout); converting x again gives the same bits.
      g.clear();
      for (int i : plan.launches[l].parts) {
        MatmulArgs a = parts[i];
        if (l > 0) a.xb = nullptr, a.ldxb = 0;
        g.push_back(a);
      }
      if (plan.launches[l].kernel == MatmulKernel::Fp8Gemv && g.size() > 1)
        matmul_fp8_gemv_multi(g.data(), static_cast<int>(g.size()), stream);
      else if (plan.launches[l].kernel == MatmulKernel::Fp8Prefill)
        run_launch(MatmulKernel::Fp8Prefill, g.data(), static_cast<int>(g.size()), stream);
      else  // one weight, or the weights without fp8: this function's own plan for them (the same launches)
        matmul_run(g.data(), static_cast<int>(g.size()), order, stream);
    }
    return;
  }
  if (count == 1) {  // the common case, without building a plan (choose_matmul is plan_matmul's one-weight rule)
    const MatmulArgs& a = parts[0];
    MatmulKernel k = choose_matmul(MatmulBackend::Cuda, order, a.M, a.K, matmul_weight(a), matmul_device());
    if (k == MatmulKernel::FreeOrder) {
      if (matmul_free_order({parts, 1})) return;
      k = choose_matmul(MatmulBackend::Cuda, MatmulOrder::RowInvariant, a.M, a.K, matmul_weight(a), matmul_device());
    }
    if (k == MatmulKernel::Fp8Dequant) return matmul_fp8_dequant(a, order, stream);
    return run_launch(k, parts, 1, stream);
  }
  MatmulPlan plan = plan_of(parts, count, order);
  if (plan.launches.size() == 1 && plan.launches[0].kernel == MatmulKernel::FreeOrder) {
    if (matmul_free_order({parts, static_cast<size_t>(count)})) return;
    plan = plan_of(parts, count, MatmulOrder::RowInvariant);  // cuBLASLt has no algorithm for a shape
  }
  if (plan.one_x_copy) {
    // One bf16 copy of x for every weight, each its own wgmma launch (cluster or slice-serial).
    SS_CHECK(matmul_bf16_wgmma_multi(parts, count, stream), "matmul: the wgmma kernel cannot run on this device");
    return;
  }
  std::vector<MatmulArgs> g;
  for (const MatmulLaunch& l : plan.launches) {
    g.clear();
    for (int i : l.parts) g.push_back(parts[i]);
    run_launch(l.kernel, g.data(), static_cast<int>(g.size()), stream);
  }
}

}  // namespace specserve::cuda::kernels
