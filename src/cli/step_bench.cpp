#include "cli/step_bench.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "backend/backend.h"
#include "cli/device_gemm_rate.h"
#include "cli/step_bench_collective.h"
#include "cli/step_bench_common.h"
#include "cli/step_bench_flops.h"
#include "cli/step_bench_long.h"
#include "cli/step_timer.h"
#include "core/env_registry.h"
#include "core/error.h"
#include "core/log.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/step_graphs.h"
#endif

namespace specserve::cli {

namespace {

using nlohmann::json;
using step_bench::Clock;
using step_bench::median_seconds;
using step_bench::profile_once;
using step_bench::random_tokens;
using step_bench::seconds_since;

// Device-to-device (or host memcpy) copy bandwidth, counting the bytes read and written.
double copy_bandwidth(const Memory& mem) {
  const size_t bytes = mem.device() == Device::CPU ? (size_t{256} << 20) : (size_t{1} << 30);
  Buffer a(mem, bytes), b(mem, bytes);
  mem.zero(a.data(), bytes);
  float sink = 0;
  const double s = median_seconds(5, [&] {
    mem.copy(b.data(), a.data(), bytes);
    mem.download(&sink, b.data(), sizeof(sink));  // waits for the copy
  });
  return 2.0 * static_cast<double>(bytes) / s;
}

void check_options(const StepBenchOptions& o) {
  auto positive = [](const std::vector<int>& v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](int x) { return x >= 1; });
  };
  SS_CHECK(positive(o.contexts) && positive(o.prefill_lengths) && o.iterations >= 1,
           "bench: --contexts, --prefill and --iterations must be >= 1");
  SS_CHECK(positive(o.decode_batches) && positive(o.verify_batches) && positive(o.verify_ks),
           "bench: --decode-batches, --verify-batches and --verify-k must be lists of numbers >= 1");
  SS_CHECK(o.prefill_chunk >= 1, "bench: --prefill-chunk must be >= 1");
  SS_CHECK(o.tau > 0, "bench: --tau must be > 0");
}

// The batch tables at `context` positions: decode over decode_batches, verify over verify_batches ×
// verify_ks, drafter propose over verify_batches and the projection; written into r.
void measure_batches(TargetModel& target, const spec::DFlashDrafter* drafter, const StepBenchOptions& o,
                     const step_bench::KvBudget& budget, double bw, std::mt19937& rng, json& r) {
  const int context = o.contexts.front();
  const Memory& mem = target.forward_memory();
  const auto weights = static_cast<double>(target.step_weight_bytes());
  const auto dequantised = static_cast<double>(target.dequantised_step_weight_bytes());
  const double kv_per_position = static_cast<double>(target.kv_block_bytes()) / kKvBlockSize;
  const auto state_bytes = static_cast<double>(target.sequence_state_bytes());
  const int max_k = *std::max_element(o.verify_ks.begin(), o.verify_ks.end());
  const int appended = static_cast<int>(std::ceil(o.tau));

  int max_batch = 1;
  for (int b : o.decode_batches) max_batch = std::max(max_batch, b);
  for (int b : o.verify_batches) max_batch = std::max(max_batch, b);
  // What the timed calls add past `context`: each step commits one row of every sequence in its batch
  // (decode: warm-ups, timed calls, host-enqueue calls and a profiled one; verify: warm-ups, timed and
  // profiled), each propose appends ceil(tau) rows to every drafter sequence in its batch.
  const int64_t calls = o.iterations + 3;
  int64_t target_added = 0, drafter_added = 0;
  for (int b : o.decode_batches) target_added += int64_t{b} * (2 * calls);
  for (int b : o.verify_batches) {
    target_added += int64_t{b} * calls * static_cast<int64_t>(o.verify_ks.size());
    drafter_added += int64_t{b} * calls * appended;
  }
  step_bench::KvDemand demand = step_bench::KvDemand::of(context, max_batch, drafter != nullptr);
  demand.target_blocks += (target_added + kKvBlockSize - 1) / kKvBlockSize + max_batch;
  if (drafter) demand.drafter_blocks += (drafter_added + kKvBlockSize - 1) / kKvBlockSize + max_batch;
  if (auto note = budget.reserve(target, drafter, demand))
    fail("bench: the batch tables at --contexts {} ({} sequences): {}", context, max_batch, *note);

  // ---- sequences holding `context` positions ----------------------------------------------------
  StepTimer timer(target, context, max_batch, max_k, o.prefill_chunk, rng);
  auto step = [&](int batch, int k) { timer.step(batch, k); };
  auto extend_batch = [&](int batch, int k, LogitsWanted logits, int64_t argmax_columns) {
    return timer.extend_batch(batch, k, logits, argmax_columns);
  };
  auto commit_one = [&](int batch) { timer.commit_one(batch); };
  // One more step of `kind` inside a profiler range (`ncu --profile-from-start off` sees only it) when
  // SPECSERVE_PROFILE_STEP names it.
  auto maybe_profile = [&](const char* kind, int batch, int k) { profile_once(kind, target, [&] { step(batch, k); }); };
  // Bytes a step over `batch` sequences must move: the weights once, each sequence's KV, and its
  // DeltaNet state read and written.
  // With fp8 weights kept, the weights count one byte an element plus their scales (the bytes streamed);
  // bf16_step_bytes is the same step with them dequantised into bf16.
  auto step_bytes = [&](int batch) { return weights + batch * (context * kv_per_position + state_bytes); };
  auto bf16_step_bytes = [&](int batch) { return step_bytes(batch) - weights + dequantised; };

  // The host's share of a decode step: the time forward() takes to enqueue a step that wants no
  // logits (so it never waits for the device). Close to the whole step time means launch-bound.
  Buffer sync_word(mem, sizeof(float));
  auto enqueue_seconds = [&](int batch) {
    std::vector<double> t;
    for (int i = 0; i < o.iterations + 2; ++i) {
      const ForwardBatch b = extend_batch(batch, 1, LogitsWanted::None, 0);
      const auto t0 = Clock::now();
      target.forward(b);
      t.push_back(seconds_since(t0));
      float sink = 0;
      mem.download(&sink, sync_word.data(), sizeof(sink));
      commit_one(batch);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };

  json decode = json::array();
  std::map<int, double> decode_s;
  for (int b : o.decode_batches) {
    const double s = median_seconds(o.iterations, [&] { step(b, 1); });
    decode_s[b] = s;
    const double bytes = step_bytes(b);
    const double enqueue = enqueue_seconds(b);
    json e = {{"batch", b},
              {"ms", s * 1e3},
              {"bytes", bytes},
              {"gb_s", bytes / s / 1e9},
              {"roofline_ms", bytes / bw * 1e3},
              {"roofline_fraction", bytes / s / bw},
              {"tokens_per_s", b / s},
              {"host_enqueue_ms", enqueue * 1e3}};
    if (dequantised != weights) {
      e["bf16_bytes"] = bf16_step_bytes(b);
      e["bf16_roofline_ms"] = bf16_step_bytes(b) / bw * 1e3;
    }
    decode.push_back(e);
    maybe_profile("decode", b, 1);
    SS_LOG_INFO("bench", "decode B={}: {:.3f} ms", b, s * 1e3);
  }
  r["decode"] = decode;
  if (target.tensor_parallel_ranks() > 0) {
    r["tensor_parallel"] = target.tensor_parallel_ranks();
    r["tensor_parallel_placement"] = step_bench::placement_label(target);
    r["collective"] = step_bench::measure_collective(target, o, decode);
  }

  json verify = json::array();
  std::map<std::pair<int, int>, double> verify_s;
  for (int b : o.verify_batches)
    for (int k : o.verify_ks) {
      const double s = median_seconds(o.iterations, [&] { step(b, k); });
      verify_s[{b, k}] = s;
      maybe_profile("verify", b, k);
      json e = {{"batch", b}, {"k", k}, {"ms", s * 1e3}, {"bytes", step_bytes(b)}};
      if (decode_s.count(b)) e["ratio_to_decode"] = s / decode_s[b];
      verify.push_back(e);
      SS_LOG_INFO("bench", "verify B={} K={}: {:.3f} ms", b, k, s * 1e3);
    }
  r["verify"] = verify;

  // ---- drafter propose ----------------------------------------------------------------------------
  if (!drafter) return;
  r["drafter_weight_bytes"] = static_cast<double>(drafter->weight_bytes());
  r["draft_matmul"] = drafter->matmul_order() == MatmulOrder::Free ? "fast" : "exact";
  r["draft_vocab"] = drafter->head_rows();  // ids the drafter scores (--draft-vocab)
  r["draft_head_bytes"] = static_cast<double>(drafter->head_bytes());
  const int gamma = drafter->block_size() - 1;
  // Context rows in the target's forward memory, as the engine hands them over (the target leaves its
  // captured features on the device for a drafter beside it).
  ProposeTimer proposer(target, *drafter, context, appended, o.prefill_chunk, timer.tokens());
  json propose = json::array();
  for (int b : o.verify_batches) {
    auto propose_once = [&] { proposer.propose(b); };
    const double s = median_seconds(o.iterations, propose_once);
    profile_once("propose", target, propose_once);
    json e = {{"batch", b}, {"ms", s * 1e3}, {"appended_rows", appended}};
    if (decode_s.count(b)) e["fraction_of_decode"] = s / decode_s[b];
    propose.push_back(e);
    SS_LOG_INFO("bench", "propose B={}: {:.3f} ms", b, s * 1e3);
    if (verify_s.count({b, gamma + 1}) && decode_s.count(b)) {
      const double spec_s = verify_s[{b, gamma + 1}] + s;
      r["projection"].push_back({{"batch", b},
                                 {"tau", o.tau},
                                 {"k", gamma + 1},
                                 {"plain_tokens_per_s", b / decode_s[b]},
                                 {"dflash_tokens_per_s", b * o.tau / spec_s},
                                 {"speedup", o.tau * decode_s[b] / spec_s}});
    }
  }
  r["propose"] = propose;
}

}  // namespace

json run_step_bench(TargetModel& target, const spec::DFlashDrafter* drafter, const std::string& label,
                    const StepBenchOptions& o) {
  check_options(o);
  const Memory& mem = target.forward_memory();
  std::mt19937 rng(7);
  json r;
  r["model"] = label;
  r["backend"] = target.backend();
  r["device"] = step_bench::device_name(target);
  r["dtype"] = dtype_name(target.weight_dtype());
  r["context"] = o.contexts.front();  // the batch tables' context
  r["iterations"] = o.iterations;
  const double bw = copy_bandwidth(mem);
  r["copy_bandwidth_gb_s"] = bw / 1e9;
  r["step_weight_bytes"] = static_cast<double>(target.step_weight_bytes());
  if (target.dequantised_step_weight_bytes() != target.step_weight_bytes())  // fp8 weights kept
    r["bf16_step_weight_bytes"] = static_cast<double>(target.dequantised_step_weight_bytes());
  const step_bench::KvBudget budget(target, drafter, o.kv_budget_bytes);
  r["kv_budget_bytes"] = budget.bytes();
  r["kv_element_bytes"] = kv_element_bytes(target);
  r["kv_dtype"] = dtype_name(target.kv_dtype());

  const std::optional<DeviceGemmRate> gemm = measure_device_gemm_rate(target.backend());
  if (gemm) {
    r["gemm_rate"] = {{"m", gemm->m},   {"n", gemm->n},           {"k", gemm->k},    {"iterations", gemm->iterations},
                      {"ms", gemm->ms}, {"tflops", gemm->tflops}, {"how", gemm->how}};
    SS_LOG_INFO("bench", "bf16 GEMM {}x{}x{}: {:.1f} TFLOP/s", gemm->m, gemm->n, gemm->k, gemm->tflops);
  }

  r["prefill_chunk"] = o.prefill_chunk;
  r["prefill"] = step_bench::measure_prefill_lengths(target, o, budget, gemm, rng);
  measure_batches(target, drafter, o, budget, bw, rng, r);
  r["contexts"] = step_bench::measure_contexts(target, drafter, o, budget, bw, rng);
  r["matmul_prefill"] = step_bench::measure_matmul_prefill(target, o.iterations, gemm);
#if SPECSERVE_HAVE_CUDA
  if (target.backend() == "cuda") {
    // How the run's kernel launches were enqueued (backend/cuda/step_graphs.h).
    const cuda::GraphStats g = cuda::graph_stats();
    r["cuda_graphs"] = {
        {"enabled", cuda::graphs_enabled()},  {"launches", g.launches}, {"segments", g.segments},
        {"graph_launches", g.graph_launches}, {"captures", g.captures}, {"direct_segments", g.direct_segments},
        {"node_updates", g.node_updates}};
  }
#endif
  return r;
}

}  // namespace specserve::cli
