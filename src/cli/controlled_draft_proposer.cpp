#include "cli/controlled_draft_proposer.h"

#include <algorithm>

#include "core/error.h"
#include "core/splitmix64.h"

namespace specserve::cli {

namespace {

// The real proposer's context, and which recorded request the sequence is (bound at its first propose).
class ControlledContext final : public engine::DraftContext {
 public:
  explicit ControlledContext(std::unique_ptr<engine::DraftContext> real) : real_(std::move(real)) {}
  // Point-mass drafts: the verifier compares the pick with the draft (the real q is for other drafts).
  std::span<const float> draft_distribution(int) const override { return {}; }
  int64_t kv_blocks() const override { return real_->kv_blocks(); }
  size_t swap_bytes() const override { return real_->swap_bytes(); }
  void swap_out() override { real_->swap_out(); }
  void swap_in() override { real_->swap_in(); }

  engine::DraftContext* real() const { return real_.get(); }
  int64_t request = -1;  // index into the recording

 private:
  std::unique_ptr<engine::DraftContext> real_;
};

ControlledContext& controlled(engine::DraftContext* c) { return *static_cast<ControlledContext*>(c); }

// A counter-based stream: the k-th number of the step keyed by (seed, request, position).
class StepRandom {
 public:
  StepRandom(uint64_t seed, uint64_t request, uint64_t position)
      : key_(splitmix64(splitmix64(seed ^ splitmix64(request)) ^ position)) {}
  uint64_t next() { return splitmix64(key_ + ++counter_); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace

ControlledDraftProposer::ControlledDraftProposer(engine::DraftProposer& real, std::vector<RecordedRequest> recorded,
                                                 std::vector<double> conditional, uint64_t seed, int64_t vocab)
    : real_(real), recorded_(std::move(recorded)), conditional_(std::move(conditional)), seed_(seed), vocab_(vocab) {
  SS_CHECK(static_cast<int>(conditional_.size()) == real_.gamma(), "controlled drafts: {} probabilities for γ = {}",
           conditional_.size(), real_.gamma());
  SS_CHECK(vocab_ >= 2, "controlled drafts: a vocabulary of {} ids has no wrong id", vocab_);
  for (size_t i = 0; i < recorded_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      SS_CHECK(recorded_[i].prompt != recorded_[j].prompt, "controlled drafts: requests {} and {} have the same prompt",
               j, i);
}

std::unique_ptr<engine::DraftContext> ControlledDraftProposer::new_context() {
  return std::make_unique<ControlledContext>(real_.new_context());
}

void ControlledDraftProposer::append_contexts(std::span<const ContextRows> rows) {
  std::vector<ContextRows> real(rows.begin(), rows.end());
  for (auto& r : real) r.context = controlled(r.context).real();
  real_.append_contexts(real);
}

const RecordedRequest& ControlledDraftProposer::bind(const engine::ProposeItem& item) const {
  ControlledContext& c = controlled(item.context);
  const auto tokens = item.history->tokens();
  const auto prompt_length = static_cast<std::ptrdiff_t>(item.history->prompt_length());
  if (c.request < 0) {
    const auto it = std::find_if(recorded_.begin(), recorded_.end(), [&](const RecordedRequest& r) {
      return std::equal(r.prompt.begin(), r.prompt.end(), tokens.begin(), tokens.begin() + prompt_length);
    });
    SS_CHECK(it != recorded_.end(), "controlled drafts: a request's prompt ({} tokens) was not recorded",
             prompt_length);
    c.request = it - recorded_.begin();
  }
  const RecordedRequest& r = recorded_[static_cast<size_t>(c.request)];
  const auto generated = tokens.subspan(static_cast<size_t>(prompt_length));
  SS_CHECK(generated.size() <= r.output.size() && std::equal(generated.begin(), generated.end(), r.output.begin()),
           "controlled drafts: request {} emitted tokens that differ from its recorded plain decoding (within its "
           "first {} tokens)",
           c.request, generated.size());
  return r;
}

void ControlledDraftProposer::propose(std::span<engine::ProposeItem> items) {
  std::vector<engine::ProposeItem> real(items.begin(), items.end());
  for (auto& item : real) item.context = controlled(item.context).real();
  real_.propose(real);  // the real drafter forward: its cost, its context
  for (auto& item : items) {
    const RecordedRequest& r = bind(item);
    const size_t next = item.history->generated();  // the output index of draft 1
    const size_t n = std::min<size_t>(static_cast<size_t>(item.max_drafts), r.output.size() - next);
    StepRandom random(seed_, static_cast<uint64_t>(controlled(item.context).request),
                      static_cast<uint64_t>(item.pending_position));
    size_t correct = 0;
    while (correct < n && random.uniform() < conditional_[correct]) ++correct;
    item.drafts->resize(n);
    for (size_t k = 0; k < n; ++k) {
      const int32_t truth = r.output[next + k];
      const auto wrong = (truth + 1 + static_cast<int64_t>(random.next() % static_cast<uint64_t>(vocab_ - 1))) % vocab_;
      (*item.drafts)[k] = k < correct ? truth : static_cast<int32_t>(wrong);
    }
  }
}

}  // namespace specserve::cli
