#pragma once
// The proposer of `specserve bench controlled` (cli/bench_modes.h): speculation at a chosen acceptance
// on any model, trained drafter or not. It wraps the real proposer, whose forward runs every step as
// in serving (so its cost is real), and then replaces the drafts it hands to verification with the
// request's recorded plain-decoding output, corrupted by a seeded process: draft i stays correct with
// probability conditional[i − 1] given draft i − 1 did (io/acceptance_spec.h), and the first
// corrupted draft and every draft after it become a wrong id (any id but the recorded one).
//
// Verification is untouched, so the emitted tokens are the recorded ones (the bench checks), and a
// draft is accepted exactly when it is correct: tokens per verify follow the chosen profile. Each
// step's draw depends only on (seed, request, position), never on batching. A benchmark tool only:
// nothing in `serve` constructs it.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/draft_proposer.h"

namespace specserve::cli {

// One request's prompt and its plain-decoding output (token ids), from the bench's first pass.
struct RecordedRequest {
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
};

class ControlledDraftProposer final : public engine::DraftProposer {
 public:
  // `real` must outlive this. Prompts must be distinct (they identify the request); conditional has
  // gamma() entries; ids are drawn from [0, vocab).
  ControlledDraftProposer(engine::DraftProposer& real, std::vector<RecordedRequest> recorded,
                          std::vector<double> conditional, uint64_t seed, int64_t vocab);

  int gamma() const override { return real_.gamma(); }
  std::vector<int> capture_layers() const override { return real_.capture_layers(); }
  std::unique_ptr<engine::DraftContext> new_context() override;
  int positions_past_context() const override { return real_.positions_past_context(); }
  size_t swap_bytes_bound(int64_t positions) const override { return real_.swap_bytes_bound(positions); }
  bool wants_device_features() const override { return real_.wants_device_features(); }
  void append_contexts(std::span<const ContextRows> rows) override;
  // The real propose, then the controlled drafts. Throws Error when a request's prompt was not
  // recorded or its output so far differs from the recording.
  void propose(std::span<engine::ProposeItem> items) override;

 private:
  const RecordedRequest& bind(const engine::ProposeItem& item) const;
  engine::DraftProposer& real_;
  std::vector<RecordedRequest> recorded_;
  std::vector<double> conditional_;
  uint64_t seed_ = 0;
  int64_t vocab_ = 0;
};

}  // namespace specserve::cli
