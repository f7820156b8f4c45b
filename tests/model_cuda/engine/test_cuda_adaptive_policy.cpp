// The promise across draft-length policies on the GPU (docs/DESIGN.md §1, docs/DFLASH.md §13): the trained
// dense and hybrid pairs on CUDA, 1 and 9 sequences at once, T = 0 and seeded T > 0, give the tokens of
// plain decoding under the fixed policy (γ 15) and under the adaptive policy on scripted step cost tables
// (so that nothing depends on timing): one where drafting pays (γ varies per sequence and step) and one
// where it never does (plain rows but for probes).
#include "../../spec/policy_lossless_checks.h"
#include "../model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;

using Param = std::tuple<std::string, std::string, int>;  // pair, dtype, sequences

class CudaAdaptivePolicy : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }

  void expect_lossless(bool seeded) {
    const auto& [pair_name, dtype, sequences] = GetParam();
    Pair pair(pair_name, dtype, "cuda");
    ASSERT_EQ(pair.drafter->backend(), "cuda");
    expect_policies_lossless(
        pair, sequences, seeded,
        pair_name + " " + dtype + ", " + std::to_string(sequences) + " sequences, " + (seeded ? "seeded" : "T=0"), 40,
        700);
  }
};

TEST_P(CudaAdaptivePolicy, GreedyIdenticalToPlainDecoding) { expect_lossless(false); }
TEST_P(CudaAdaptivePolicy, SeededSamplingIdenticalToPlainDecoding) { expect_lossless(true); }

INSTANTIATE_TEST_SUITE_P(Pairs, CudaAdaptivePolicy,
                         ::testing::Combine(::testing::Values("dense-trained", "hybrid-trained"),
                                            ::testing::Values("f32", "bf16"), ::testing::Values(1, 9)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                           std::to_string(std::get<2>(info.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve
