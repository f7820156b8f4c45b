// The promise under tensor parallelism (docs/DESIGN.md §6.2), on the CPU simulation of N ranks: the trained
// dense and hybrid pairs and the demo pair, several sequences sharing steps, give with the DFlash drafter
// exactly the tokens of plain decoding of the same sharded target, at T = 0 and seeded T > 0.
#include <cstdlib>

#include "tensor_parallel_lossless_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

TEST(TensorParallelLossless, TrainedPairsUnderTwoRanks) {
  for (const std::string name : {"dense-trained", "hybrid-trained"}) {
    ShardedPair p = load_pair(pair_dir(name) + "/target", pair_dir(name) + "/draft", "bf16", 2);
    expect_lossless(p, name + " N=2");
  }
}

TEST(TensorParallelLossless, DenseTrainedPairUnderFourRanks) {
  // 2 KV heads over 4 ranks: each replicated on two.
  ShardedPair p = load_pair(pair_dir("dense-trained") + "/target", pair_dir("dense-trained") + "/draft", "bf16", 4);
  expect_lossless(p, "dense-trained N=4");
}

TEST(TensorParallelLossless, DemoPairUnderTwoRanks) {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  const std::string demo = (env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR)) + "/models/demo-coder";
  ShardedPair p = load_pair(demo + "/target", demo + "/drafter", "bf16", 2);
  expect_lossless(p, "demo-coder N=2");
}

}  // namespace
}  // namespace specserve::spec
