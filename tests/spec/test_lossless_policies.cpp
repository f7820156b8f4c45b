// The promise (docs/DESIGN.md §1) across draft-length policies (docs/DFLASH.md §13): the trained dense
// and hybrid pairs, 1 to 16 sequences at once, T = 0 and seeded T > 0, give the tokens of plain decoding
// under the fixed policy (γ 15), the adaptive policy on a cost table where drafting pays (long and
// mixed drafts), and the adaptive policy on one where it never does (γ = 0 but for probes).
#include "policy_lossless_checks.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

void expect_policies_lossless(const std::string& pair_name, int sequences, bool seeded) {
  Pair pair(pair_name, "f32");
  expect_policies_lossless(pair, sequences, seeded,
                           pair_name + ", " + std::to_string(sequences) + " sequences, " + (seeded ? "seeded" : "T=0"));
}

class LosslessPolicies : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(LosslessPolicies, GreedyIdenticalToPlainDecoding) {
  expect_policies_lossless(std::get<0>(GetParam()), std::get<1>(GetParam()), false);
}

TEST_P(LosslessPolicies, SeededSamplingIdenticalToPlainDecoding) {
  expect_policies_lossless(std::get<0>(GetParam()), std::get<1>(GetParam()), true);
}

INSTANTIATE_TEST_SUITE_P(Pairs, LosslessPolicies,
                         ::testing::Combine(::testing::Values("dense-trained", "hybrid-trained"),
                                            ::testing::Values(1, 5, 16)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve::spec
