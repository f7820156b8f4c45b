// The collective's share of a sharded target's decode step (step_bench_collective.h).
#include "cli/step_bench_collective.h"

#include <algorithm>
#include <vector>

#include "cli/step_bench_common.h"
#include "core/log.h"

namespace specserve::cli::step_bench {

using nlohmann::json;

namespace {
bool one_memory(const std::vector<const Memory*>& mems) {
  return std::all_of(mems.begin(), mems.end(), [&](const Memory* m) { return m == mems[0]; });
}
}  // namespace

std::string placement_label(const TargetModel& target) {
  const std::vector<const Memory*> mems = target.rank_memories();
  if (mems.empty()) return "";
  if (one_memory(mems)) return "one memory";
  return mems[0]->device() == Device::CPU ? "host memories of their own" : fmt::format("{} GPUs", mems.size());
}

json measure_collective(const TargetModel& target, const StepBenchOptions& o, const json& decode) {
  const Collective* c = target.collective();
  if (c == nullptr) return json::array();
  const std::vector<const Memory*> mems = target.rank_memories();
  const int n = c->ranks();
  const int64_t H = target.hidden_size(), V = target.vocab_size();
  const int reduces = 2 * target.config().num_layers + 1;
  // Every rank's queued work done: a word read back from each rank's memory.
  std::vector<Buffer> sync_words;
  for (const Memory* m : mems) sync_words.emplace_back(*m, sizeof(float));
  auto wait = [&] {
    for (size_t r = 0; r < mems.size(); ++r) {
      float sink = 0;
      mems[r]->download(&sink, sync_words[r].data(), sizeof(sink));
    }
  };
  json out = json::array();
  for (const json& d : decode) {
    const int64_t b = d.at("batch").get<int64_t>();
    // As the sharded forward leaves them (model/tensor_parallel_forward.cpp): each rank's partial in its memory
    // (side by side where every rank shares one), the sum into each rank's replica.
    std::vector<MemTensor> owned;
    std::vector<TensorView> parts, outs;
    if (one_memory(mems)) {
      owned.push_back(MemTensor::zeros(*mems[0], DType::F32, {n * b, H}));
      for (int r = 0; r < n; ++r) parts.push_back(owned.back().view().rows(r * b, (r + 1) * b));
    } else {
      for (const Memory* m : mems) {
        owned.push_back(MemTensor::zeros(*m, DType::F32, {b, H}));
        parts.push_back(owned.back().view());
      }
    }
    for (const Memory* m : mems) {
      owned.push_back(MemTensor::zeros(*m, DType::F32, {b, H}));
      outs.push_back(owned.back().view());
    }
    const double reduce_s = median_seconds(o.iterations, [&] {
      for (int i = 0; i < reduces; ++i) c->all_reduce_sum(parts, outs);
      wait();
    });
    // The vocabulary blocks of the plan (model/tensor_parallel_plan.h): rows [V r / N, V (r + 1) / N), each in
    // its rank's memory; the logits gathered into rank 0's (the forward's: the other outputs alias it).
    MemTensor logits = MemTensor::zeros(*mems[0], DType::F32, {b, V});
    std::vector<TensorView> blocks;
    for (int r = 0; r < n; ++r) {
      const int64_t begin = V * r / n, end = V * (r + 1) / n;
      owned.push_back(MemTensor::zeros(*mems[static_cast<size_t>(r)], DType::F32, {b, end - begin}));
      blocks.push_back(owned.back().view());
    }
    const std::vector<TensorView> gathered(static_cast<size_t>(n), logits.view());
    const double gather_s = median_seconds(o.iterations, [&] {
      c->all_gather_columns(blocks, gathered);
      wait();
    });
    const double step_ms = d.at("ms").get<double>(), collective_ms = (reduce_s + gather_s) * 1e3;
    out.push_back({{"batch", b},
                   {"all_reduce_calls", reduces},
                   {"all_reduce_ms", reduce_s * 1e3},
                   {"all_gather_ms", gather_s * 1e3},
                   {"collective_ms", collective_ms},
                   {"decode_ms", step_ms},
                   {"share_of_decode", collective_ms / step_ms}});
    SS_LOG_INFO("bench", "collective B={}: {:.3f} ms of a {:.3f} ms decode step ({} ranks)", b, collective_ms, step_ms,
                n);
  }
  return out;
}

}  // namespace specserve::cli::step_bench
