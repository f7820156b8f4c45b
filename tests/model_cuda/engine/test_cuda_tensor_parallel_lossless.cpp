// The promise under tensor parallelism on one GPU (docs/DESIGN.md §6.2, §6.5): the target sharded over N ranks
// that all run on the GPU, the drafter beside them on the GPU; the trained dense and hybrid pairs under N = 2
// and the dense pair under N = 4 (its 2 KV heads each replicated on two ranks), several sequences sharing
// steps, give with the drafter exactly the tokens of plain decoding of the same sharded target, at T = 0 and
// seeded T > 0.
#include "../../spec/tensor_parallel_lossless_util.h"
#include "../model_cuda_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

TEST(CudaTensorParallelLossless, TrainedPairsUnderTwoRanks) {
  SKIP_WITHOUT_GPU();
  for (const std::string name : {"dense-trained", "hybrid-trained"}) {
    ShardedPair p = load_pair(pair_dir(name) + "/target", pair_dir(name) + "/draft", "bf16", 2, "cuda");
    ASSERT_EQ(p.drafter->backend(), "cuda");
    expect_lossless(p, name + " N=2 on the GPU");
  }
}

TEST(CudaTensorParallelLossless, DenseTrainedPairUnderFourRanks) {
  SKIP_WITHOUT_GPU();
  ShardedPair p =
      load_pair(pair_dir("dense-trained") + "/target", pair_dir("dense-trained") + "/draft", "bf16", 4, "cuda");
  expect_lossless(p, "dense-trained N=4 on the GPU");
}

}  // namespace
}  // namespace specserve::spec
