// Control flow with oracle drafts (docs/DFLASH.md §11.2): the drafts are forced to the target's true
// greedy continuation for the first j slots and garbage after, with j = 0..γ over successive steps.
// Exactly j drafts must be accepted, the committed tokens must be the target's, and after every step
// the drafter holds one context row per committed position (target length == drafter context
// length; rows appended = accepted + 1). The real DFlash proposer runs underneath (its drafts are
// then replaced), so its context accumulation is what is being checked.
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

class OracleProposer final : public engine::DraftProposer {
 public:
  OracleProposer(DFlashProposer& inner, std::vector<int32_t> truth) : inner_(inner), truth_(std::move(truth)) {}

  int gamma() const override { return inner_.gamma(); }
  std::vector<int> capture_layers() const override { return inner_.capture_layers(); }
  bool wants_device_features() const override { return inner_.wants_device_features(); }
  std::unique_ptr<engine::DraftContext> new_context() override {
    auto c = inner_.new_context();
    context_ = c.get();
    return c;
  }
  void append_contexts(std::span<const ContextRows> rows) override { inner_.append_contexts(rows); }
  void propose(std::span<engine::ProposeItem> items) override {
    for (const auto& item : items)  // the invariant, seen from outside the proposer
      EXPECT_EQ(DFlashProposer::context_rows(*item.context), item.pending_position);
    inner_.propose(items);
    for (auto& item : items) {
      const int j = next_j_;
      next_j_ = (next_j_ + 1) % (gamma() + 1);
      forced_j_.push_back(j);
      item.drafts->clear();
      for (int k = 1; k <= item.max_drafts; ++k) {
        const int32_t t = truth_.at(static_cast<size_t>(item.pending_position + k));
        item.drafts->push_back(k <= j ? t : (t + 1) % 300);  // garbage: anything but the truth
      }
    }
  }

  engine::DraftContext* context() const { return context_; }
  const std::vector<int>& forced_j() const { return forced_j_; }

 private:
  DFlashProposer& inner_;
  std::vector<int32_t> truth_;  // prompt + greedy continuation, indexed by position
  engine::DraftContext* context_ = nullptr;
  int next_j_ = 0;
  std::vector<int> forced_j_;
};

struct OracleCase {
  std::string pair;
  int gamma;
};

class OracleDrafts : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleDrafts, ExactlyJAcceptedAndContextFollowsCommits) {
  const auto [name, gamma] = GetParam();
  Pair pair(name, "f32");
  const Trace trace = load_trace(name);
  // Long enough for every j to run uncapped: Σ (j + 1) over j = 0..γ tokens, plus slack.
  const int64_t max_tokens = (gamma + 1) * (gamma + 2) / 2 + 40;

  auto plain_engine = make_engine(*pair.target, nullptr);
  const RequestRun plain = run_request(*plain_engine, greedy_request(trace.prompt, max_tokens));
  std::vector<int32_t> truth = trace.prompt;
  truth.insert(truth.end(), plain.tokens.begin(), plain.tokens.end());
  truth.resize(truth.size() + 32, 0);  // drafts may look past the end

  DFlashProposer inner(*pair.drafter, {.gamma = gamma});
  OracleProposer oracle(inner, truth);
  auto engine = make_engine(*pair.target, &oracle);
  engine::GenerationRequest req = greedy_request(trace.prompt, max_tokens);
  int checked = 0;
  req.on_step = [&](const engine::SpecStep& s) {
    // After the step's commit: one drafter context row per committed target position.
    EXPECT_EQ(DFlashProposer::context_rows(*oracle.context()), s.position + s.accepted + 1);
    ++checked;
  };
  const RequestRun run = run_request(*engine, std::move(req));

  EXPECT_EQ(run.tokens, plain.tokens);
  ASSERT_EQ(run.steps.size(), static_cast<size_t>(checked));
  size_t proposal = 0;
  std::vector<bool> seen(static_cast<size_t>(gamma) + 1, false);
  for (const auto& s : run.steps) {
    if (s.drafts.empty()) continue;  // the last token: nothing left to draft
    const int j = oracle.forced_j().at(proposal++);
    const int n = static_cast<int>(s.drafts.size());
    EXPECT_EQ(s.accepted, std::min(j, n)) << "step at " << s.position << ", j = " << j;
    // Every committed token is the target's: the accepted truth, then the target's own pick.
    for (size_t i = 0; i < s.emitted.size(); ++i) EXPECT_EQ(s.emitted[i], truth[s.position + 1 + i]);
    if (j <= n) seen[static_cast<size_t>(j)] = true;
  }
  for (int j = 0; j <= gamma; ++j) EXPECT_TRUE(seen[static_cast<size_t>(j)]) << "j = " << j << " never ran uncapped";
}

INSTANTIATE_TEST_SUITE_P(Cases, OracleDrafts,
                         ::testing::Values(OracleCase{"dense-trained", 15}, OracleCase{"hybrid-trained", 15},
                                           OracleCase{"hybrid-trained", 4}),
                         [](const auto& info) {
                           std::string n = info.param.pair + "_gamma" + std::to_string(info.param.gamma);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(DrafterContext, RejectsGapsAndRepeats) {
  Pair pair("dense-random", "f32");
  auto seq = pair.drafter->new_sequence();
  const std::vector<float> row(static_cast<size_t>(pair.drafter->feature_width()), 0.5f);
  append_rows(*seq, 0, row);
  EXPECT_THROW(append_rows(*seq, 0, row), Error);  // position 0 twice
  EXPECT_THROW(append_rows(*seq, 2, row), Error);  // position 1 skipped
  append_rows(*seq, 1, row);
  EXPECT_EQ(seq->rows(), 2);
}

// A propose whose pending position is not the drafter's context length is refused (the proposer's
// SS_DEBUG_CHECK in debug builds, the drafter's own check otherwise), never drafted from a context
// with a gap or an overlap.
TEST(DrafterContext, ProposeRefusesABrokenInvariant) {
  Pair pair("dense-random", "f32");
  DFlashProposer proposer(*pair.drafter, {.gamma = 3});
  auto ctx = proposer.new_context();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  const std::vector<float> rows(prompt.size() * static_cast<size_t>(pair.drafter->feature_width()), 0.25f);
  const engine::DraftProposer::ContextRows context{
      ctx.get(), 0, prompt,
      TensorView::contiguous(const_cast<float*>(rows.data()), DType::F32,
                             {static_cast<int64_t>(prompt.size()), pair.drafter->feature_width()})};
  proposer.append_contexts(std::span(&context, 1));
  sampling::RequestParams params;
  params.sampling.temperature = 0.0f;
  const sampling::Sampler sampler(params, {pair.target->vocab_size(), 0});
  sampling::SamplerState history = sampler.make_state(prompt);
  history.push(9);  // the pending token, at position 5
  std::vector<int32_t> drafts;
  engine::ProposeItem item{ctx.get(), 9, 5, &sampler, &history, 3, &drafts};
  proposer.propose(std::span(&item, 1));
  EXPECT_EQ(drafts.size(), 3u);
  item.pending_position = 6;  // one position skipped
  EXPECT_THROW(proposer.propose(std::span(&item, 1)), Error);
}

}  // namespace
}  // namespace specserve::spec
