#include "cli/step_bench_long.h"

#include <algorithm>
#include <cmath>

#include "backend/memory.h"
#include "cli/step_bench_flops.h"
#include "core/error.h"
#include "core/log.h"

namespace specserve::cli::step_bench {

using nlohmann::json;

int prefill_iterations(int iterations, int tokens) {
  const int64_t scaled = (int64_t{iterations} * 8192 + tokens - 1) / std::max(tokens, 1);
  return static_cast<int>(std::clamp<int64_t>(scaled, 1, iterations));
}

json measure_prefill_lengths(TargetModel& target, const StepBenchOptions& o, const KvBudget& budget,
                             const std::optional<DeviceGemmRate>& gemm, std::mt19937& rng) {
  const int64_t V = target.vocab_size();
  const double params = prefill_matmul_parameters(target);
  json out = json::array();
  bool warmed = false;
  for (const int n : o.prefill_lengths) {
    json e = {{"tokens", n}};
    if (auto note = budget.reserve(target, nullptr, KvDemand::of(n, 1, false))) {
      e["skipped"] = *note;
      out.push_back(e);
      SS_LOG_INFO("bench", "prefill {} tokens {}", n, *note);
      continue;
    }
    const auto prompt = random_tokens(static_cast<size_t>(n), rng, V);
    const std::span<const int32_t> all(prompt);
    const int last_begin = (n - 1) / o.prefill_chunk * o.prefill_chunk;
    // One prompt, from a new sequence to its first token id on the host.
    auto prefill_once = [&] {
      auto seq = target.new_sequence();
      prefill(target, *seq, all.first(static_cast<size_t>(last_begin)), o.prefill_chunk);
      ForwardBatch b;
      b.spans.push_back(
          {seq.get(), all.subspan(static_cast<size_t>(last_begin)), SpanMode::Prefill, LogitsWanted::Last, V});
      const ForwardResult r = target.forward(b);
      SS_CHECK(r.argmax.size() == 1, "bench: the prefill's last chunk returned no first token");
    };
    // One warm-up call up to 16,384 tokens (and before the first length measured); longer prompts
    // follow kernels already warm and their KV already reserved.
    const int warmups = (n <= 16384 || !warmed) ? 1 : 0;
    warmed = true;
    const int iterations = prefill_iterations(o.iterations, n);
    const double s = median_seconds(iterations, prefill_once, warmups);
    profile_once("prefill", target, prefill_once);
    const double matmul_flops = 2.0 * params * n;
    const double attention_flops = prefill_attention_flops(target, n);
    e["iterations"] = iterations;
    e["warmups"] = warmups;
    e["chunk"] = o.prefill_chunk;
    e["seconds"] = s;
    e["tokens_per_s"] = n / s;
    e["ttft_ms"] = s * 1e3;
    e["matmul_flops"] = matmul_flops;
    e["matmul_tflops_effective"] = matmul_flops / s / 1e12;
    e["attention_flops"] = attention_flops;
    e["attention_share"] = attention_flops / (matmul_flops + attention_flops);
    e["tflops_effective"] = (matmul_flops + attention_flops) / s / 1e12;
    if (gemm) e["matmul_fraction_of_gemm_rate"] = matmul_flops / s / 1e12 / gemm->tflops;
    out.push_back(e);
    SS_LOG_INFO("bench", "prefill {} tokens: {:.3f} s ({} timed)", n, s, iterations);
  }
  return out;
}

json measure_contexts(TargetModel& target, const spec::DFlashDrafter* drafter, const StepBenchOptions& o,
                      const KvBudget& budget, double copy_bandwidth, std::mt19937& rng) {
  const int64_t V = target.vocab_size();
  const int k = *std::max_element(o.verify_ks.begin(), o.verify_ks.end());
  const int appended = static_cast<int>(std::ceil(o.tau));
  const auto tokens = random_tokens(static_cast<size_t>(k), rng, V);
  const auto weights = static_cast<double>(target.step_weight_bytes());
  const auto state_bytes = static_cast<double>(target.sequence_state_bytes());
  // Positions the timed steps add past the context (each decode and verify commits one row; the
  // drafter appends ceil(tau) rows a propose), kept inside the reservation.
  const int slack = (o.iterations + 2) * std::max(2, appended) + k + kKvBlockSize;

  // The drafter's context rows, a chunk at a time, in the target's forward memory.
  MemTensor features;
  if (drafter) {
    features = MemTensor::empty(target.forward_memory(), DType::F32,
                                {std::max(o.prefill_chunk, appended), drafter->feature_width()});
    target.forward_memory().fill_uniform(features.as<void>(), DType::F32, static_cast<size_t>(features.view().numel()),
                                         5, -1.0f, 1.0f);
  }

  std::unique_ptr<SequenceState> seq;
  std::unique_ptr<spec::DrafterSequence> dseq;
  auto step = [&](int rows) {
    ForwardBatch b;
    b.spans.push_back({seq.get(), std::span<const int32_t>(tokens).first(static_cast<size_t>(rows)), SpanMode::Extend,
                       LogitsWanted::All, V});
    target.forward(b);
    target.commit(*seq, 1);
  };
  auto propose = [&] {
    const spec::DrafterSequence::Append a[] = {{dseq.get(), dseq->rows(), features.view().rows(0, appended)}};
    spec::DrafterSequence::append_many(a);
    const spec::DraftBlock block[] = {{dseq.get(), tokens[0], dseq->rows()}};
    const int gamma = drafter->block_size() - 1;
    drafter->draft_argmax(block, gamma, gamma, V);
  };

  json out = json::array();
  json first;  // the first measured entry, which the others divide by
  for (const int c : o.contexts) {
    json e = {{"positions", c}};
    if (auto note = budget.reserve(target, drafter, KvDemand::of(int64_t{c} + slack, 1, drafter != nullptr))) {
      e["skipped"] = *note;
      out.push_back(e);
      SS_LOG_INFO("bench", "context {} {}", c, *note);
      continue;
    }
    if (!seq || seq->length() > c) {  // a shorter context than the last: start over
      seq.reset();
      dseq.reset();
      seq = target.new_sequence();
      if (drafter) dseq = drafter->new_sequence();
    }
    prefill(target, *seq, random_tokens(static_cast<size_t>(c - seq->length()), rng, V), o.prefill_chunk);
    if (drafter) fill_drafter_context(*drafter, *dseq, c - dseq->rows(), features.view());

    const double decode_s = median_seconds(o.iterations, [&] { step(1); });
    const double verify_s = median_seconds(o.iterations, [&] { step(k); });
    const double kv = kv_read_bytes(target, c);
    const double step_bytes = weights + kv + state_bytes;
    e["decode_ms"] = decode_s * 1e3;
    e["verify_k"] = k;
    e["verify_ms"] = verify_s * 1e3;
    e["verify_ratio_to_decode"] = verify_s / decode_s;
    e["kv_read_bytes"] = kv;
    e["kv_read_gb_s"] = kv / decode_s / 1e9;
    e["kv_read_fraction_of_copy"] = kv / decode_s / copy_bandwidth;
    e["step_bytes"] = step_bytes;
    e["roofline_fraction"] = step_bytes / decode_s / copy_bandwidth;
    if (drafter) e["propose_ms"] = median_seconds(o.iterations, propose) * 1e3;
    if (first.is_null()) {
      e["decode_ratio_to_first"] = 1.0;
      e["verify_ratio_to_first"] = 1.0;
      if (drafter) e["propose_ratio_to_first"] = 1.0;
      first = e;
    } else {
      e["decode_ratio_to_first"] = e["decode_ms"].get<double>() / first["decode_ms"].get<double>();
      e["verify_ratio_to_first"] = e["verify_ms"].get<double>() / first["verify_ms"].get<double>();
      if (drafter) e["propose_ratio_to_first"] = e["propose_ms"].get<double>() / first["propose_ms"].get<double>();
      // The extra KV over the extra time: the rate at which the longer context's KV was read.
      const double extra_s = (e["decode_ms"].get<double>() - first["decode_ms"].get<double>()) / 1e3;
      const double extra_kv = kv - first["kv_read_bytes"].get<double>();
      if (extra_s > 0 && extra_kv > 0) {
        e["kv_marginal_gb_s"] = extra_kv / extra_s / 1e9;
        e["kv_marginal_fraction_of_copy"] = extra_kv / extra_s / copy_bandwidth;
      }
    }
    out.push_back(e);
    SS_LOG_INFO("bench", "context {}: decode {:.3f} ms, verify K={} {:.3f} ms", c, decode_s * 1e3, k, verify_s * 1e3);
  }
  return out;
}

json measure_matmul_prefill(TargetModel& target, int iterations, const std::optional<DeviceGemmRate>& gemm) {
  const Memory& mem = target.forward_memory();
  const ModelConfig& c = target.config();
  const int64_t rows = mem.device() == Device::CPU ? 256 : 4096;
  const int64_t n = c.intermediate_size, k = c.hidden_size;
  const DType wdtype = target.weight_dtype();
  MemTensor x = MemTensor::empty(mem, DType::F32, {rows, k});
  MemTensor w = MemTensor::empty(mem, wdtype, {n, k});
  MemTensor y = MemTensor::empty(mem, DType::F32, {rows, n});
  mem.fill_uniform(x.as<void>(), DType::F32, static_cast<size_t>(rows * k), 21, -1.0f, 1.0f);
  mem.fill_uniform(w.as<void>(), wdtype, static_cast<size_t>(n * k), 22, -0.05f, 0.05f);
  float sink = 0;
  const double s = median_seconds(iterations, [&] {
    target.forward_ops().matmul_prefill(x.view(), w.view(), y.view());
    mem.download(&sink, y.as<void>(), sizeof(sink));  // waits for the matmul
  });
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(n) * static_cast<double>(k);
  json e = {{"m", rows},     {"n", n},
            {"k", k},        {"weight_dtype", dtype_name(wdtype)},
            {"ms", s * 1e3}, {"tflops", flops / s / 1e12}};
  if (gemm) e["fraction_of_gemm_rate"] = flops / s / 1e12 / gemm->tflops;
  return e;
}

}  // namespace specserve::cli::step_bench
