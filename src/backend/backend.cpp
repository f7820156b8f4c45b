#include "backend/backend.h"

#include "core/error.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_ops.h"
#endif

namespace specserve {

bool cuda_device_present() {
#if SPECSERVE_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

Backend backend_named(std::string_view name) {
  if (name == "auto") return backend_named(cuda_device_present() ? "cuda" : "cpu");
  if (name == "cpu") return {"cpu", &cpu_ops(), &cpu_memory(), 64, &cpu_rank_memory};
  if (name == "cuda") {
#if SPECSERVE_HAVE_CUDA
    SS_CHECK(cuda::device_count() > 0, "--backend cuda: no usable CUDA device ({})", cuda::unavailable_reason());
    const Memory& (*device_memory)(int) = &cuda_memory;
    return {"cuda", &cuda_ops(), &cuda_memory(), cuda::device_count(), device_memory};
#else
    fail("--backend cuda: this build has no CUDA backend (configure with CUDA enabled)");
#endif
  }
  fail("--backend must be auto, cpu or cuda (got '{}')", name);
}

}  // namespace specserve
