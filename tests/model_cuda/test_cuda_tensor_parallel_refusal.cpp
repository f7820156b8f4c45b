// --tensor-parallel N > 1 on the CUDA backend is refused until the multi-GPU path is served (docs/DESIGN.md
// §6.5), with a message that says what it will need (N GPUs, NCCL) and what is missing.
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

TEST(CudaTensorParallel, IsRefusedSayingWhatItNeeds) {
  SKIP_WITHOUT_GPU();
  LoadOptions o;
  o.dtype = "f32";
  o.backend = "cuda";
  o.tensor_parallel = 2;
  try {
    TargetModel::load(cuda_fixture_dir("qwen3_untied"), o);
    FAIL() << "--tensor-parallel 2 loaded on the CUDA backend";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* words : {"needs 2 GPUs and NCCL", "not served yet", "--backend cpu"})
      EXPECT_NE(m.find(words), std::string::npos) << words << " not in: " << m;
  }
}

}  // namespace
}  // namespace specserve
