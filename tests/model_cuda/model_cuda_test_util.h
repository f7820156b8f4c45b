#pragma once
// Helpers for the CUDA model tests: the model tests' helpers (../model/model_test_util.h), fixture
// paths that honour $SPECSERVE_SOURCE_DIR (so a copied test binary finds the fixtures), and the GPU
// skip.
#include <cstdlib>

#include "../model/model_test_util.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/kernels.h"

namespace specserve::testing {

inline std::string source_dir() {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  return env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR);
}

inline std::string cuda_fixture_dir(const std::string& name) { return source_dir() + "/tests/fixtures/model/" + name; }

inline bool have_gpu() { return cuda::device_count() > 0; }

#define SKIP_WITHOUT_GPU() \
  if (!::specserve::testing::have_gpu()) GTEST_SKIP() << "no CUDA device: " << ::specserve::cuda::unavailable_reason()

// The fixture kinds the CUDA model tests run on: attention-only and hybrid DeltaNet, f32 and bf16 weights,
// the KV cache in the default dtype (auto: f32 for f32 weights, bf16 for bf16 ones) or a chosen one.
struct CudaModelCase {
  std::string fixture;
  std::string dtype;
  std::string kv_dtype = "auto";
};
inline auto cuda_model_cases() {
  return ::testing::Values(CudaModelCase{"qwen3_untied", "f32"}, CudaModelCase{"qwen3_5_flat", "f32"},
                           CudaModelCase{"qwen3_5_vl", "bf16"}, CudaModelCase{"qwen3_tied", "bf16"},
                           CudaModelCase{"qwen3_5_flat", "f32", "bf16"});
}
inline std::string cuda_model_case_name(const ::testing::TestParamInfo<CudaModelCase>& i) {
  return i.param.fixture + "_" + i.param.dtype + (i.param.kv_dtype == "auto" ? "" : "_kv" + i.param.kv_dtype);
}

// Kept fp8 weights' prefill through the bf16 dequantisation instead of the W8A8 GEMM (whose activations are
// rounded to e4m3: backend/cuda/matmul_prefill_fp8_sm90a.cu) while in scope, so that its logits can be compared
// bit for bit with a bf16 model's.
struct DequantisedFp8Prefill {
  bool was = cuda::kernels::set_matmul_fp8_w8a8(false);
  ~DequantisedFp8Prefill() { cuda::kernels::set_matmul_fp8_w8a8(was); }
};

inline std::unique_ptr<TargetModel> load_on(const std::string& fixture, const std::string& dtype,
                                            const std::string& backend, const std::string& kv_dtype = "auto") {
  LoadOptions o;
  o.dtype = dtype;
  o.backend = backend;
  o.kv_dtype = kv_dtype;
  return TargetModel::load(cuda_fixture_dir(fixture), o);
}

}  // namespace specserve::testing
