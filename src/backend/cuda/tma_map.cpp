#include "backend/cuda/tma_map.h"

#include <array>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "core/error.h"

namespace specserve::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    SS_CHECK(q == cudaDriverEntryPointSuccess && f != nullptr, "TMA: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// cuTensorMapEncodeTiled is a driver call: it needs a context current on the calling thread, which the
// runtime binds only at a thread's first runtime call that needs one. A thread whose launches so far were
// only recorded (step_graphs.h: enqueued at the segment's end) may not have one yet — the engine's thread
// at its first prefill measured CUDA_ERROR_INVALID_CONTEXT (201). cudaSetDevice binds the device's primary
// context (CUDA 12 and later), once per thread and device.
void bind_context_once() {
  thread_local std::array<bool, kMaxDevices> bound{};  // per device (device_scope.h)
  const int device = current_device();
  if (bound[static_cast<size_t>(device)]) return;
  CUDA_CHECK(cudaSetDevice(device));
  bound[static_cast<size_t>(device)] = true;
}

CUtensorMap tensor_map_2d(const void* base, CUtensorMapDataType type, int elem_bytes, int64_t rows, int64_t cols,
                          int64_t ld, int box_cols, int box_rows, CUtensorMapSwizzle swizzle, const char* who) {
  bind_context_once();
  CUtensorMap m;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * static_cast<cuuint64_t>(elem_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r =
      encode_fn()(&m, type, 2, const_cast<void*>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SS_CHECK(r == CUDA_SUCCESS, "{}: cuTensorMapEncodeTiled failed ({}) for [{}, {}] stride {}", who, static_cast<int>(r),
           rows, cols, ld);
  return m;
}

}  // namespace

CUtensorMap bf16_tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                            const char* who) {
  return tensor_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, rows, cols, ld, box_cols, box_rows,
                       CU_TENSOR_MAP_SWIZZLE_128B, who);
}

CUtensorMap e4m3_tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                            const char* who) {
  return tensor_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, rows, cols, ld, box_cols, box_rows,
                       CU_TENSOR_MAP_SWIZZLE_128B, who);
}

CUtensorMap f32_tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                           const char* who) {
  return tensor_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, rows, cols, ld, box_cols, box_rows,
                       CU_TENSOR_MAP_SWIZZLE_NONE, who);
}

}  // namespace specserve::cuda
