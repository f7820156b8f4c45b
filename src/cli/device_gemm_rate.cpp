#include "cli/device_gemm_rate.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/gemm_rate.h"
#endif

namespace specserve::cli {

std::optional<DeviceGemmRate> measure_device_gemm_rate(std::string_view backend) {
#if SPECSERVE_HAVE_CUDA
  if (backend != "cuda") return std::nullopt;
  const cuda::GemmRate g = cuda::measure_bf16_gemm_rate(8192, 8192, 8192, 20);
  return DeviceGemmRate{g.m, g.n, g.k, g.iterations, g.seconds * 1e3, g.tflops, g.layout};
#else
  (void)backend;
  return std::nullopt;
#endif
}

}  // namespace specserve::cli
