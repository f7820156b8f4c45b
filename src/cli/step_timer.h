#pragma once
// Engine-shaped steps to time on a loaded target and drafter, shared by `bench steps`' batch tables
// (cli/step_bench.cpp) and the step cost calibration (cli/step_cost_calibration.h), so both time the
// same thing: decode = B sequences × 1 row, verify = B × K rows, each followed by commit(1) (the
// rollback a rejected draft costs), greedy argmax on the backend; propose = B drafter blocks of the
// trained size after appending some context rows per sequence, as the engine hands them over.
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

class StepTimer {
 public:
  // `max_batch` sequences prefilled to `context` positions (in chunks of prefill_chunk), and input tokens
  // for up to max_k rows each. The caller reserves their KV blocks first.
  StepTimer(TargetModel& target, int context, int max_batch, int max_k, int prefill_chunk, std::mt19937& rng);

  // The forward of one step over the first `batch` sequences with `k` rows each (the first `extra` of
  // them k + 1 rows, at most max_k).
  ForwardBatch extend_batch(int batch, int k, LogitsWanted logits, int64_t argmax_columns, int extra = 0) const;
  void commit_one(int batch);
  // One step over the first `batch` sequences with `k` rows each (the first `extra` k + 1), reduced to
  // argmaxes, then commit(1).
  void step(int batch, int k, int extra = 0);
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  TargetModel& target_;
  std::vector<std::unique_ptr<SequenceState>> seqs_;
  std::vector<int32_t> tokens_;
};

class ProposeTimer {
 public:
  // Drafter sequences of `context` context rows each, made as needed; each propose first appends
  // `appended` rows. Context rows come from one [max(prefill_chunk, appended), feature_width] f32 tensor in
  // the target's forward memory. The caller reserves the drafter's KV blocks first.
  ProposeTimer(const TargetModel& target, const spec::DFlashDrafter& drafter, int context, int appended,
               int prefill_chunk, std::vector<int32_t> tokens);
  // One propose over the first `batch` drafter sequences: their new rows in one hand-off, then a whole
  // block each, `slots` of its drafts scored (1..block_size - 1; 0: all).
  void propose(int batch, int slots = 0);

 private:
  const TargetModel& target_;
  const spec::DFlashDrafter& drafter_;
  int context_, appended_;
  MemTensor rows_;
  std::vector<int32_t> tokens_;
  std::vector<std::unique_ptr<spec::DrafterSequence>> ctx_;
};

}  // namespace specserve::cli
