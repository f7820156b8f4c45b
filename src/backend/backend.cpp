#include "backend/backend.h"

#include "core/error.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_ops.h"
#endif

namespace specserve {

Backend backend_named(std::string_view name) {
  if (name == "cpu") return {"cpu", &cpu_ops(), &cpu_memory()};
  if (name == "cuda") {
#if SPECSERVE_HAVE_CUDA
    SS_CHECK(cuda::device_count() > 0, "--backend cuda: no usable CUDA device ({})", cuda::unavailable_reason());
    return {"cuda", &cuda_ops(), &cuda_memory()};
#else
    fail("--backend cuda: this build has no CUDA backend (configure with CUDA enabled)");
#endif
  }
  fail("--backend must be cpu or cuda (got '{}')", name);
}

}  // namespace specserve
