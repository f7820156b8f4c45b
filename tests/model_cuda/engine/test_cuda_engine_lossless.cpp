// The promise end to end on the GPU (docs/DESIGN.md §1): the engine with a DFlash drafter (on the GPU beside
// the target, or on the CPU fed the target's captured features) produces exactly the tokens of plain
// decoding on the same GPU target, at T = 0 and for seeded T > 0, with several requests batched; a bf16
// drafter on the GPU with its default free matmul order (cuBLASLt, drafts that may depend on the batch)
// included.
#include <random>

#include "../../spec/spec_test_util.h"
#include "backend/cuda/matmul_free_order.h"
#include "../model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;
using specserve::testing::source_dir;

struct Case {
  std::string pair, dtype;
  int gamma;
  bool host_drafter = false;
  int draft_vocab = 0;  // > 0: the drafter scores ids [0, draft_vocab) and the EOS only (--draft-vocab)
};

std::string dflash_dir(const std::string& pair) { return source_dir() + "/tests/fixtures/dflash/" + pair; }

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p = {{7, 12, 17, 22, 27, 32, 37, 42}};
  std::mt19937 rng(11);
  for (int len : {3, 17, 40}) {
    std::vector<int32_t> ids(static_cast<size_t>(len));
    for (auto& t : ids) t = static_cast<int32_t>(rng() % 300);
    p.push_back(ids);
  }
  return p;
}

class CudaLossless : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }

  void expect_identical(bool seeded) {
    const Case& c = GetParam();
    LoadOptions o;
    o.dtype = c.dtype;
    o.backend = "cuda";
    auto target = TargetModel::load(dflash_dir(c.pair) + "/target", o);
    auto drafter = spec::DFlashDrafter::load(dflash_dir(c.pair) + "/draft", *target, c.dtype, c.host_drafter);
    ASSERT_EQ(drafter->backend(), c.host_drafter ? "cpu" : "cuda");
    constexpr int32_t kEos = 382;
    if (c.draft_vocab > 0) {
      std::vector<int32_t> ids;
      for (int32_t i = 0; i < c.draft_vocab; ++i) ids.push_back(i);
      ids.push_back(kEos);  // gathered on the device: two runs of rows of the target's lm_head
      drafter->set_vocabulary(ids);
    }
    const auto ps = prompts();
    std::vector<engine::GenerationRequest> plain_reqs, spec_reqs;
    for (size_t i = 0; i < ps.size(); ++i) {
      auto make = [&] { return seeded ? sampled_request(ps[i], 32, 1000 + i, 0.8f, 0.9f) : greedy_request(ps[i], 32); };
      plain_reqs.push_back(make());
      spec_reqs.push_back(make());
    }
    auto plain_engine = make_engine(*target, nullptr);
    const auto plain = run_all(*plain_engine, std::move(plain_reqs));
    spec::DFlashProposer proposer(*drafter, {.gamma = c.gamma});
    // A drafter on the GPU takes the target's captured rows where they are; a CPU one gets them downloaded.
    EXPECT_EQ(proposer.wants_device_features(), !c.host_drafter);
    auto spec_engine = make_engine(*target, &proposer);
    const uint64_t free_before = cuda::free_order_matmuls(), free_attn_before = cuda::free_order_attentions();
    const auto sp = run_all(*spec_engine, std::move(spec_reqs));
    // A bf16 drafter on the GPU runs its larger matmuls in a free order (the default): the context
    // projections of the prompts (68 rows) at least, whatever the drafts then are.
    if (c.dtype == "bf16" && !c.host_drafter) {
      EXPECT_GT(cuda::free_order_matmuls(), free_before) << "the drafter's matmuls took the cuBLASLt path";
    }
    // Its attention takes the free-order kernel whatever the weights' type.
    if (!c.host_drafter) {
      EXPECT_GT(cuda::free_order_attentions(), free_attn_before)
          << "the drafter's attention took the free-order kernel";
    }
    int64_t accepted = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      ASSERT_TRUE(plain[i].error.empty() && sp[i].error.empty()) << plain[i].error << sp[i].error;
      EXPECT_EQ(sp[i].tokens, plain[i].tokens) << "prompt " << i;
      for (const auto& s : sp[i].steps) {
        accepted += s.accepted;
        if (c.draft_vocab > 0) {
          for (int32_t t : s.drafts) {
            EXPECT_TRUE(t < c.draft_vocab || t == kEos) << "a draft outside the subset: " << t;
          }
        }
      }
    }
    if (!seeded) {
      EXPECT_GT(accepted, 0) << "the trained pair must actually speculate";
    }
  }
};

TEST_P(CudaLossless, GreedyIdenticalToPlainDecoding) { expect_identical(false); }
TEST_P(CudaLossless, SeededSamplingIdenticalToPlainDecoding) { expect_identical(true); }

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaLossless,
    ::testing::Values(Case{"dense-trained", "f32", 3}, Case{"hybrid-trained", "f32", 15},
                      Case{"hybrid-trained", "bf16", 3}, Case{"dense-trained", "bf16", 15},
                      Case{"hybrid-trained", "f32", 4, true}, Case{"dense-trained", "bf16", 15, true},
                      Case{"dense-trained", "bf16", 15, false, 192}, Case{"hybrid-trained", "f32", 7, false, 128}),
    [](const auto& i) {
      std::string n = i.param.pair + "_" + i.param.dtype + "_gamma" + std::to_string(i.param.gamma) +
                      (i.param.host_drafter ? "_cpu_drafter" : "") +
                      (i.param.draft_vocab > 0 ? "_vocab" + std::to_string(i.param.draft_vocab) : "");
      for (auto& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

}  // namespace
}  // namespace specserve
