#include "cli/step_bench_common.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/memory.h"
#include "backend/ops.h"
#include "core/env_registry.h"
#include "core/error.h"
#include "model/target_model.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace specserve::cli::step_bench {

void profile_once(const char* kind, const TargetModel& target, const std::function<void()>& fn) {
#if SPECSERVE_HAVE_CUDA
  if (std::string_view(env_text("SPECSERVE_PROFILE_STEP")) == kind && target.backend() == "cuda") {
    cuda::profiler_start();
    fn();
    cuda::profiler_stop();
  }
#else
  (void)kind, (void)target, (void)fn;
#endif
}

std::string device_name(const TargetModel& target) {
#if SPECSERVE_HAVE_CUDA
  if (target.backend() == "cuda") return cuda::device_info(0).name;
#endif
  return "cpu";
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median_seconds(int iterations, const std::function<void()>& fn, int warmups) {
  for (int i = 0; i < warmups; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<int32_t> random_tokens(size_t n, std::mt19937& rng, int64_t vocab) {
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

void prefill(TargetModel& target, SequenceState& seq, std::span<const int32_t> tokens, int chunk) {
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min<int64_t>(n, begin + chunk);
    ForwardBatch b;
    b.spans.push_back({&seq, tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin)),
                       SpanMode::Prefill, LogitsWanted::None});
    target.forward(b);
  }
}

void fill_drafter_context(const spec::DFlashDrafter& drafter, spec::DrafterSequence& seq, int64_t rows,
                          const TensorView& features) {
  const int64_t step = features.shape[0];
  for (int64_t done = 0; done < rows; done += step) {
    const int64_t n = std::min(step, rows - done);
    const spec::DrafterSequence::Append append[] = {{&seq, seq.rows(), features.rows(0, n)}};
    spec::DrafterSequence::append_many(append);
    spec::DrafterSequence* one[] = {&seq};
    drafter.project_context(one);
  }
}

KvBudget::KvBudget(const TargetModel& target, const spec::DFlashDrafter* drafter, int64_t budget_bytes)
    : target_(&target), drafter_(drafter) {
  if (budget_bytes > 0) {
    bytes_ = static_cast<double>(budget_bytes);
  } else {
    const Memory& mem = target.forward_memory();
    bytes_ = static_cast<double>(mem.available_bytes()) * (mem.device() == Device::CPU ? 0.5 : 0.9);
  }
}

KvDemand KvDemand::of(int64_t positions, int sequences, bool with_drafter) {
  const int64_t blocks = (positions + kKvBlockSize - 1) / kKvBlockSize * sequences;
  return {blocks, with_drafter ? blocks + sequences : 0, sequences};
}

double KvBudget::need(const KvDemand& d) const {
  double bytes = static_cast<double>(d.target_blocks) * static_cast<double>(target_->kv_block_bytes()) +
                 static_cast<double>(d.sequences) * static_cast<double>(target_->sequence_state_bytes());
  if (drafter_) bytes += static_cast<double>(d.drafter_blocks) * static_cast<double>(drafter_->kv_block_bytes());
  return bytes;
}

std::optional<std::string> KvBudget::reserve(TargetModel& target, const spec::DFlashDrafter* drafter,
                                             const KvDemand& d) const {
  const double need_bytes = need(d);
  constexpr double kGiB = double(size_t{1} << 30);
  if (need_bytes > bytes_)
    return fmt::format("skipped: needs {:.3f} GiB of KV cache and state, over the bench's {:.3f} GiB (--kv-cache-mib)",
                       need_bytes / kGiB, bytes_ / kGiB);
  try {
    target.reserve(d.target_blocks, d.sequences);
    if (drafter && d.drafter_blocks > 0) drafter->reserve_kv_blocks(d.drafter_blocks);
  } catch (const Error& e) {
    return fmt::format("skipped: {}", e.what());
  }
  return std::nullopt;
}

}  // namespace specserve::cli::step_bench
