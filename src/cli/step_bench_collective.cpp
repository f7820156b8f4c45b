// The collective's share of a sharded target's decode step (step_bench_collective.h).
#include "cli/step_bench_collective.h"

#include <vector>

#include "cli/step_bench_common.h"
#include "core/log.h"

namespace specserve::cli::step_bench {

using nlohmann::json;

json measure_collective(const TargetModel& target, const StepBenchOptions& o, const json& decode) {
  const Collective* c = target.collective();
  if (c == nullptr) return json::array();
  const Memory& mem = target.forward_memory();
  const int n = c->ranks();
  const int64_t H = target.hidden_size(), V = target.vocab_size();
  const int reduces = 2 * target.config().num_layers + 1;
  Buffer sync_word(mem, sizeof(float));
  auto wait = [&] {
    float sink = 0;
    mem.download(&sink, sync_word.data(), sizeof(sink));
  };
  json out = json::array();
  for (const json& d : decode) {
    const int64_t b = d.at("batch").get<int64_t>();
    // The partials side by side, as the sharded forward leaves them (model/tensor_parallel_forward.cpp).
    MemTensor partials = MemTensor::zeros(mem, DType::F32, {n * b, H}), x = MemTensor::zeros(mem, DType::F32, {b, H});
    std::vector<TensorView> parts;
    for (int r = 0; r < n; ++r) parts.push_back(partials.view().rows(r * b, (r + 1) * b));
    const std::vector<TensorView> outs(static_cast<size_t>(n), x.view());
    const double reduce_s = median_seconds(o.iterations, [&] {
      for (int i = 0; i < reduces; ++i) c->all_reduce_sum(parts, outs);
      wait();
    });
    // The vocabulary blocks of the plan (model/tensor_parallel_plan.h): rows [V r / N, V (r + 1) / N).
    MemTensor columns = MemTensor::zeros(mem, DType::F32, {b, V}), logits = MemTensor::zeros(mem, DType::F32, {b, V});
    std::vector<TensorView> blocks;
    for (int r = 0; r < n; ++r) {
      const int64_t begin = V * r / n, end = V * (r + 1) / n;
      TensorView v = columns.view();
      v.data = columns.as<float>() + begin;
      v.shape = Shape{b, end - begin};
      blocks.push_back(v);
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
