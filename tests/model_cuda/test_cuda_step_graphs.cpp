// CUDA graphs (backend/cuda/step_graphs.h) change no bits: a run of decode steps and short verify
// extends (with rollback) through recorded segments replayed as graphs gives the logits of the same
// run launched kernel by kernel, on every fixture kind (attention-only, hybrid DeltaNet, f32 and bf16
// weights). And the graphs are in fact used: captured, replayed, and updated where arguments changed
// (every sixth step runs while the test holds a block of every allocator size class, so the step's
// buffers move). Steps of a different row count each time share graphs: their nodes' grids are updated
// before the replay, not captured again.
#include <algorithm>
#include <random>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/step_graphs.h"
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

class CudaStepGraphs : public ::testing::TestWithParam<CudaModelCase> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = load_on(GetParam().fixture, GetParam().dtype, "cuda", GetParam().kv_dtype);
    was_on_ = cuda::graphs_enabled();
  }
  void TearDown() override {
    if (model_) cuda::set_graphs_enabled(was_on_);
  }

  // Prefill, then 48 steps: a decode of one token, or every fifth step an extend of 4 tokens of which
  // 2 are committed (a verify with rollback); with `varying`, step i extends 1 + i % 7 tokens (commits at
  // most 2). Every step's logits rows, in order.
  std::vector<std::vector<float>> run(bool graphs, bool varying = false) {
    cuda::set_graphs_enabled(graphs);
    std::mt19937 rng(7);
    auto token = [&] { return static_cast<int32_t>(rng() % static_cast<uint32_t>(model_->vocab_size())); };
    std::vector<int32_t> prompt(21);
    for (auto& t : prompt) t = token();
    auto s = model_->new_sequence();
    std::vector<std::vector<float>> rows;
    auto pre = run_one(*model_, *s, prompt, SpanMode::Prefill, LogitsWanted::Last);
    rows.push_back(row(pre.logits, 0));
    for (int step = 0; step < 48; ++step) {
      std::vector<Buffer> held;
      if (step % 6 == 2)
        for (size_t bytes = 512; bytes <= (size_t{16} << 20); bytes *= 2) {
          held.emplace_back(cuda_memory(), bytes);
          held.emplace_back(cuda_memory(), bytes + bytes / 3);
        }
      const int k = varying ? 1 + step % 7 : step % 5 == 4 ? 4 : 1;
      std::vector<int32_t> toks(k);
      for (auto& t : toks) t = token();
      auto r = run_one(*model_, *s, toks, SpanMode::Extend, LogitsWanted::All);
      for (int i = 0; i < k; ++i) rows.push_back(row(r.logits, i));
      model_->commit(*s, std::min(k, 2));
    }
    return rows;
  }

  std::unique_ptr<TargetModel> model_;
  bool was_on_ = true;
};

TEST_P(CudaStepGraphs, GraphedStepsEqualDirectLaunches) {
  const auto direct = run(false);
  const cuda::GraphStats before = cuda::graph_stats();
  const auto graphed = run(true);
  const cuda::GraphStats after = cuda::graph_stats();
  ASSERT_EQ(direct.size(), graphed.size());
  for (size_t i = 0; i < direct.size(); ++i) ASSERT_EQ(direct[i], graphed[i]) << "logits row " << i;

  const uint64_t captures = after.captures - before.captures;
  const uint64_t replays = after.graph_launches - before.graph_launches - captures;
  EXPECT_GT(captures, 0u);
  EXPECT_GT(replays, captures) << "segments should replay more often than they are captured";
  EXPECT_GT(after.node_updates - before.node_updates, 0u);
  // A second run of the same steps replays more than it captures (every shape was seen before).
  const auto again = run(true);
  const cuda::GraphStats last = cuda::graph_stats();
  for (size_t i = 0; i < direct.size(); ++i) ASSERT_EQ(direct[i], again[i]) << "second run, logits row " << i;
  EXPECT_GT(last.graph_launches - after.graph_launches, 2 * (last.captures - after.captures));
}

TEST_P(CudaStepGraphs, StepsOfVaryingRowsShareGraphs) {
  const auto direct = run(false, true);
  const cuda::GraphStats before = cuda::graph_stats();
  const auto graphed = run(true, true);
  const auto again = run(true, true);
  const cuda::GraphStats after = cuda::graph_stats();
  ASSERT_EQ(direct.size(), graphed.size());
  for (size_t i = 0; i < direct.size(); ++i) {
    ASSERT_EQ(direct[i], graphed[i]) << "logits row " << i;
    ASSERT_EQ(direct[i], again[i]) << "second run, logits row " << i;
  }
  // Seven row counts in turn: a shape not yet seen often enough for a graph of its own replays its
  // signature's graph with new grids instead of running directly.
  EXPECT_GT(after.geometry_updates - before.geometry_updates, 0u);
  EXPECT_GT(after.graph_launches - before.graph_launches, 8 * (after.direct_segments - before.direct_segments));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaStepGraphs, cuda_model_cases(), cuda_model_case_name);

}  // namespace
}  // namespace specserve
