#include "cli/step_cost_calibration.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "backend/matmul_choice.h"
#include "cli/step_bench_common.h"
#include "cli/step_timer.h"
#include "core/error.h"
#include "core/log.h"
#include "io/step_cost_profile.h"

namespace specserve::cli {

namespace {

std::vector<int> up_to(std::vector<int> v, int limit) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](int x) { return x > limit; }), v.end());
  if (v.empty()) v.push_back(1);
  return v;
}

int blocks_for_positions(int64_t positions) { return static_cast<int>((positions + kKvBlockSize - 1) / kKvBlockSize); }

// Long-context batch sizes: 1 and, when the short plan has it, 4.
std::vector<int> long_batches(const CalibrationPlan& p) {
  std::vector<int> v = {1};
  if (std::find(p.batches.begin(), p.batches.end(), 4) != p.batches.end()) v.push_back(4);
  return v;
}

std::vector<int> long_ks(const CalibrationPlan& p) {
  std::vector<int> v = {1};
  if (p.ks.back() > 1) v.push_back(p.ks.back());
  return v;
}

int max_of(const std::vector<int>& v) { return *std::max_element(v.begin(), v.end()); }

// The most sequences any step of the plan runs at the short context.
int short_batch(const CalibrationPlan& p) {
  int b = std::max(max_of(p.batches), p.decode_batches.empty() ? 1 : max_of(p.decode_batches));
  for (const CalibrationEdge& e : p.edges) b = std::max(b, e.batch);
  return b;
}

}  // namespace

CalibrationPlan calibration_plan(std::string_view backend, int max_seqs, int gamma_max) {
  CalibrationPlan p;
  const int k_max = gamma_max + 1;
  if (backend == "cpu") {
    p.batches = up_to({1, 2}, max_seqs);
    p.ks = k_max > 1 ? std::vector<int>{1, k_max} : std::vector<int>{1};
    p.short_context = 32;
    p.long_context = 160;
    p.iterations = 1;
    p.warmups = 1;
    return p;
  }
  p.batches = up_to({1, 4, 16, 64}, max_seqs);
  p.decode_batches = up_to({128, 256}, max_seqs);
  if (p.decode_batches == std::vector<int>{1}) p.decode_batches.clear();
  for (int k : {1, 2, 4, 8})
    if (k < k_max) p.ks.push_back(k);
  p.ks.push_back(k_max);
  // Exactly one row past each kernel's range, with the fewest sequences that make it (where they fit).
  for (const int64_t rows : {kGemvMaxRows + 1, kMidMaxRows + 1, kWgmmaSerialTile + 1, kWgmmaTmaMaxRows + 1}) {
    const int r = static_cast<int>(rows);
    const int batch = (r + k_max - 1) / k_max;
    if (batch > max_seqs) continue;
    p.edges.push_back({batch, r / batch, r % batch});
  }
  return p;
}

int64_t kv_blocks_needed(const CalibrationPlan& p, int prefill_chunk) {
  (void)prefill_chunk;
  const int calls = p.iterations + p.warmups;
  const int k_max = max_of(p.ks);
  // Each timed call commits one row of every sequence in its batch.
  const int64_t short_added =
      int64_t{calls} * static_cast<int64_t>(p.ks.size() * p.batches.size() + p.decode_batches.size() + p.edges.size());
  const int64_t short_blocks =
      int64_t{short_batch(p)} * (blocks_for_positions(p.short_context + short_added + k_max) + 1);
  const int64_t long_added = int64_t{calls} * static_cast<int64_t>(long_ks(p).size() * long_batches(p).size());
  const int64_t long_blocks =
      int64_t{max_of(long_batches(p))} * (blocks_for_positions(p.long_context + long_added + k_max) + 1);
  return std::max(short_blocks, long_blocks);
}

Calibration calibrate_step_costs(TargetModel& target, const spec::DFlashDrafter& drafter, const CalibrationPlan& p,
                                 int prefill_chunk) {
  const auto t0 = step_bench::Clock::now();
  Calibration c;
  std::mt19937 rng(11);
  const int k_max = max_of(p.ks);
  auto time_steps = [&](int context, const std::vector<int>& batches, const std::vector<int>& ks,
                        const std::vector<int>& decode_only, const std::vector<CalibrationEdge>& edges) {
    int max_batch = std::max(max_of(batches), decode_only.empty() ? 1 : max_of(decode_only));
    for (const CalibrationEdge& e : edges) max_batch = std::max(max_batch, e.batch);
    StepTimer timer(target, context, max_batch, k_max, prefill_chunk, rng);
    auto time = [&](int b, int k, int extra) {
      const double s = step_bench::median_seconds(
          p.iterations, [&] { timer.step(b, k, extra); }, p.warmups);
      c.steps.push_back({b, k, context, s, extra});
    };
    for (int b : batches)
      for (int k : ks) time(b, k, 0);
    for (int b : decode_only) time(b, 1, 0);
    for (const CalibrationEdge& e : edges) time(e.batch, e.k, e.extra);
    std::vector<int32_t> tokens = timer.tokens();
    ProposeTimer proposer(target, drafter, context, 1, prefill_chunk, std::move(tokens));
    // Each batch with every draft scored, and the largest with one a sequence too (the per-draft term).
    auto time_propose = [&](int b, int slots) {
      const double s = step_bench::median_seconds(
          p.iterations, [&] { proposer.propose(b, slots); }, p.warmups);
      c.proposes.push_back({b, context, s, slots});
    };
    const int drafts = std::max(1, k_max - 1);
    for (int b : batches) time_propose(b, drafts);
    if (drafts > 1) time_propose(max_of(batches), 1);
  };
  time_steps(p.short_context, p.batches, p.ks, p.decode_batches, p.edges);
  time_steps(p.long_context, long_batches(p), long_ks(p), {}, {});
  c.costs = engine::fit_step_costs(c.steps, c.proposes);
  c.seconds = step_bench::seconds_since(t0);
  return c;
}

std::string step_cost_model_key(const TargetModel& target, const spec::DFlashDrafter& drafter) {
  const ModelConfig& t = target.config();
  const ModelConfig& d = drafter.config();
  return fmt::format(
      "{} hidden {} intermediate {} layers {} ({} attention) heads {}/{} head_dim {} vocab {} weights {} kv {}; "
      "drafter hidden {} layers {} block {} head {} matmul {}",
      t.model_type, t.hidden_size, t.intermediate_size, t.num_layers, t.num_attention_layers(), t.num_heads,
      t.num_kv_heads, t.head_dim, t.vocab_size, dtype_name(target.weight_dtype()), dtype_name(target.kv_dtype()),
      d.hidden_size, d.num_layers, drafter.block_size(), drafter.head_rows(),
      drafter.matmul_order() == MatmulOrder::Free ? "fast" : "exact");
}

std::string step_cost_device(const TargetModel& target) { return step_bench::device_name(target); }

std::string step_cost_build() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) return "unknown";
  return fmt::format("specserve {} bytes, modified {}", static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtime));
}

StepCosts serving_step_costs(TargetModel& target, const spec::DFlashDrafter& drafter, int max_seqs, int gamma_max,
                             int64_t kv_blocks, int prefill_chunk, const std::string& profile_path) {
  if (!profile_path.empty()) {
    try {
      std::ifstream in(profile_path, std::ios::binary);
      SS_CHECK(in.good(), "cannot read '{}'", profile_path);
      std::stringstream text;
      text << in.rdbuf();
      const StepCostProfile profile = parse_step_cost_profile(text.str());
      check_step_cost_profile_key(profile, step_cost_model_key(target, drafter), step_cost_device(target),
                                  step_cost_build());
      const engine::StepCostModel model(profile.costs);
      SS_LOG_INFO("serve", "step cost model from {} (--step-cost-profile): {}", profile_path,
                  model.describe(gamma_max));
      return profile.costs;
    } catch (const Error& e) {
      SS_LOG_WARN("serve", "--step-cost-profile {} refused ({}); calibrating instead", profile_path, e.what());
    }
  }
  CalibrationPlan plan = calibration_plan(target.backend(), max_seqs, gamma_max);
  // Within the KV budget: fewer sequences, then a shorter long context, until the plan fits.
  while (kv_blocks_needed(plan, prefill_chunk) > kv_blocks) {
    if (!plan.decode_batches.empty()) {
      plan.decode_batches.pop_back();
    } else if (!plan.edges.empty()) {
      plan.edges.pop_back();
    } else if (plan.batches.size() > 1) {
      plan.batches.pop_back();
    } else if (plan.long_context > 2 * plan.short_context) {
      plan.long_context /= 2;
    } else {
      fail(
          "step cost calibration: the KV budget of {} blocks cannot hold its sequences (needs {}); give "
          "--draft-policy fixed or a larger --kv-cache-mib",
          kv_blocks, kv_blocks_needed(plan, prefill_chunk));
    }
  }
  const Calibration c = calibrate_step_costs(target, drafter, plan, prefill_chunk);
  const engine::StepCostModel model(c.costs);
  SS_LOG_INFO("serve", "step cost model calibrated in {:.1f} s ({} steps, {} proposes timed): {}", c.seconds,
              c.steps.size(), c.proposes.size(), model.describe(gamma_max));
  return c.costs;
}

}  // namespace specserve::cli
