// The drafter's context hand-off of one engine step (engine/step.cpp, stage 6): every decoding sequence's
// committed rows to DFlashProposer::append_contexts, on the CPU with the tiny synthetic pair
// (model/synthetic_shapes.h). The host work a step pays for a loaded drafter even when no sequence drafts
// (issue 29: at 64 sequences on an H200, plain steps with a drafter took ~0.4 ms more host time).
//
//   build/bin/bench_context_handoff [--benchmark_filter=...]
//
//   BM_ContextHandOff/N   N sequences, one committed row each (a plain decode step): the engine's
//                         ContextRows and the proposer's append. Every 255 steps the waiting rows are
//                         projected outside the timed region (the drafter's forward is not host work).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "engine/draft_proposer.h"
#include "model/synthetic_shapes.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"
#include "spec/dflash_proposer.h"

namespace {

using namespace specserve;

struct Pair {
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<spec::DFlashDrafter> drafter;
};

Pair& tiny_pair() {
  static Pair* pair = [] {
    auto* p = new Pair;
    const SyntheticShape shape = synthetic_shape("tiny");
    LoadOptions lo;
    lo.threads = 1;
    p->target = TargetModel::synthetic(shape.target, lo);
    p->drafter = spec::DFlashDrafter::synthetic(shape.drafter, *p->target);
    return p;
  }();
  return *pair;
}

void BM_ContextHandOff(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  Pair& pair = tiny_pair();
  spec::DFlashProposer proposer(*pair.drafter, {.gamma = 15});
  const int64_t width = pair.drafter->feature_width();
  std::vector<std::unique_ptr<engine::DraftContext>> contexts;
  for (size_t i = 0; i < n; ++i) contexts.push_back(proposer.new_context());
  // The step's captured rows, one per sequence (the forward's capture buffer).
  std::vector<float> captured(n * static_cast<size_t>(width), 0.5f);
  const TensorView rows = TensorView::contiguous(captured.data(), DType::F32, {static_cast<int64_t>(n), width});
  std::vector<int32_t> tokens(n, 7);
  int64_t position = 0;
  std::vector<engine::DraftProposer::ContextRows> context_rows;  // as Engine::hand_over_context keeps it
  for (auto _ : state) {
    context_rows.clear();
    for (size_t i = 0; i < n; ++i) {
      const auto r = static_cast<int64_t>(i);
      context_rows.push_back(
          {contexts[i].get(), position, std::span<const int32_t>(&tokens[i], 1), rows.rows(r, r + 1)});
    }
    proposer.append_contexts(context_rows);
    ++position;
    if (position % 255 == 0) {
      state.PauseTiming();
      std::vector<spec::DrafterSequence*> seqs;
      for (size_t i = 0; i < n; ++i) seqs.push_back(spec::DFlashProposer::sequence_of(*contexts[i]));
      pair.drafter->project_context(seqs);
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_ContextHandOff)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
