#include "cli/step_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include <fmt/format.h>

#include "backend/backend.h"
#include "core/env_registry.h"
#include "core/error.h"
#include "core/log.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/step_graphs.h"
#endif

namespace specserve::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Median seconds of `iterations` calls of fn after 2 warm-up calls.
double median_seconds(int iterations, const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

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

// SPECSERVE_PROFILE_STEP: which step to repeat inside a profiler range ("decode", "verify", "propose"), or "".
std::string profile_step() { return std::string(env_text("SPECSERVE_PROFILE_STEP")); }

std::vector<int32_t> random_tokens(size_t n, std::mt19937& rng, int64_t vocab) {
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

std::string device_name(const TargetModel& target) {
#if SPECSERVE_HAVE_CUDA
  if (target.backend() == "cuda") return cuda::device_info(0).name;
#endif
  return "cpu";
}

}  // namespace

json run_step_bench(TargetModel& target, const spec::DFlashDrafter* drafter, const std::string& label,
                    const StepBenchOptions& o) {
  SS_CHECK(o.context >= 1 && o.prefill >= 1 && o.iterations >= 1,
           "bench: --context, --prefill and --iterations must be >= 1");
  const int64_t V = target.vocab_size();
  const Memory& mem = target.forward_memory();
  std::mt19937 rng(7);
  json r;
  r["model"] = label;
  r["backend"] = target.backend();
  r["device"] = device_name(target);
  r["dtype"] = dtype_name(target.weight_dtype());
  r["context"] = o.context;
  const double bw = copy_bandwidth(mem);
  r["copy_bandwidth_gb_s"] = bw / 1e9;
  const auto weights = static_cast<double>(target.step_weight_bytes());
  r["step_weight_bytes"] = weights;
  const double kv_per_position = static_cast<double>(target.kv_block_bytes()) / kKvBlockSize;
  const auto state_bytes = static_cast<double>(target.sequence_state_bytes());

  // ---- prefill ---------------------------------------------------------------------------------
  {
    auto seq = target.new_sequence();
    const auto prompt = random_tokens(static_cast<size_t>(o.prefill), rng, V);
    const auto t0 = Clock::now();
    for (int begin = 0; begin < o.prefill; begin += 512) {
      const int end = std::min(o.prefill, begin + 512);
      ForwardBatch b;
      b.spans.push_back({seq.get(), std::span<const int32_t>(prompt).subspan(begin, end - begin), SpanMode::Prefill,
                         end == o.prefill ? LogitsWanted::Last : LogitsWanted::None, V});
      target.forward(b);
    }
    const double s = seconds_since(t0);
    r["prefill"] = {{"tokens", o.prefill}, {"seconds", s}, {"tokens_per_s", o.prefill / s}};
    SS_LOG_INFO("bench", "prefill {} tokens: {:.3f} s", o.prefill, s);
  }

  // ---- sequences holding `context` positions ----------------------------------------------------
  int max_batch = 1;
  for (int b : o.decode_batches) max_batch = std::max(max_batch, b);
  for (int b : o.verify_batches) max_batch = std::max(max_batch, b);
  std::vector<std::unique_ptr<SequenceState>> seqs;
  for (int i = 0; i < max_batch; ++i) {
    seqs.push_back(target.new_sequence());
    const auto prompt = random_tokens(static_cast<size_t>(o.context), rng, V);
    for (int begin = 0; begin < o.context; begin += 512) {
      const int end = std::min(o.context, begin + 512);
      ForwardBatch b;
      b.spans.push_back({seqs.back().get(), std::span<const int32_t>(prompt).subspan(begin, end - begin),
                         SpanMode::Prefill, LogitsWanted::None});
      target.forward(b);
    }
  }
  // One engine step over the first `batch` sequences with `k` rows each, then commit(1).
  const auto tokens = random_tokens(64, rng, V);
  auto extend_batch = [&](int batch, int k, LogitsWanted logits, int64_t argmax_columns) {
    ForwardBatch b;
    for (int i = 0; i < batch; ++i)
      b.spans.push_back({seqs[static_cast<size_t>(i)].get(), std::span<const int32_t>(tokens).subspan(i % 32, k),
                         SpanMode::Extend, logits, argmax_columns});
    return b;
  };
  auto commit_one = [&](int batch) {
    for (int i = 0; i < batch; ++i) target.commit(*seqs[static_cast<size_t>(i)], 1);
  };
  auto step = [&](int batch, int k) {
    target.forward(extend_batch(batch, k, LogitsWanted::All, V));
    commit_one(batch);
  };
  // One more step of `kind` inside a profiler range (`ncu --profile-from-start off` sees only it) when
  // SPECSERVE_PROFILE_STEP names it.
  const std::string profile = profile_step();
  auto maybe_profile = [&](const char* kind, int batch, int k) {
#if SPECSERVE_HAVE_CUDA
    if (profile == kind && target.backend() == "cuda") {
      cuda::profiler_start();
      step(batch, k);
      cuda::profiler_stop();
    }
#else
    (void)kind, (void)batch, (void)k;
#endif
  };
  // Bytes a step over `batch` sequences must move: the weights once, each sequence's KV, and its
  // DeltaNet state read and written.
  auto step_bytes = [&](int batch) { return weights + batch * (o.context * kv_per_position + state_bytes); };

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
    decode.push_back({{"batch", b},
                      {"ms", s * 1e3},
                      {"bytes", bytes},
                      {"gb_s", bytes / s / 1e9},
                      {"roofline_fraction", bytes / s / bw},
                      {"tokens_per_s", b / s},
                      {"host_enqueue_ms", enqueue * 1e3}});
    maybe_profile("decode", b, 1);
    SS_LOG_INFO("bench", "decode B={}: {:.3f} ms", b, s * 1e3);
  }
  r["decode"] = decode;

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
  if (drafter) {
    r["drafter_weight_bytes"] = static_cast<double>(drafter->weight_bytes());
    r["draft_matmul"] = drafter->matmul_order() == MatmulOrder::Free ? "fast" : "exact";
    r["draft_vocab"] = drafter->head_rows();  // ids the drafter scores (--draft-vocab)
    r["draft_head_bytes"] = static_cast<double>(drafter->head_bytes());
    const int gamma = drafter->block_size() - 1;
    const int appended = static_cast<int>(std::ceil(o.tau));
    const int64_t fw = drafter->feature_width();
    std::uniform_real_distribution<float> feature(-1.0f, 1.0f);
    std::vector<float> host_rows(static_cast<size_t>(std::max(o.context, appended) * fw));
    for (auto& f : host_rows) f = feature(rng);
    // The rows in the target's forward memory, as the engine hands them over (the target leaves its
    // captured features on the device for a drafter beside it).
    const MemTensor rows = MemTensor::empty(target.forward_memory(), DType::F32, {std::max(o.context, appended), fw});
    target.forward_memory().upload(rows.as<void>(), host_rows.data(), host_rows.size() * sizeof(float));
    json propose = json::array();
    std::vector<std::unique_ptr<spec::DrafterSequence>> ctx;
    for (int b : o.verify_batches) {
      while (static_cast<int>(ctx.size()) < b) {
        ctx.push_back(drafter->new_sequence());
        const spec::DrafterSequence::Append prompt[] = {{ctx.back().get(), 0, rows.view().rows(0, o.context)}};
        spec::DrafterSequence::append_many(prompt);
        spec::DrafterSequence* one[] = {ctx.back().get()};
        drafter->project_context(one);
      }
      auto propose_once = [&] {
        // Each sequence's new context rows, in one copy as the engine hands them over (append_contexts).
        std::vector<spec::DrafterSequence::Append> appends;
        for (int i = 0; i < b; ++i) {
          spec::DrafterSequence& d = *ctx[static_cast<size_t>(i)];
          appends.push_back({&d, d.rows(), rows.view().rows(0, appended)});
        }
        spec::DrafterSequence::append_many(appends);
        std::vector<spec::DraftBlock> blocks;
        for (int i = 0; i < b; ++i) {
          spec::DrafterSequence& d = *ctx[static_cast<size_t>(i)];
          blocks.push_back({&d, tokens[static_cast<size_t>(i)], d.rows()});
        }
        drafter->draft_argmax(blocks, gamma, gamma, V);
      };
      const double s = median_seconds(o.iterations, propose_once);
#if SPECSERVE_HAVE_CUDA
      if (profile == "propose" && target.backend() == "cuda") {
        cuda::profiler_start();
        propose_once();
        cuda::profiler_stop();
      }
#endif
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

std::string format_step_bench(const json& r) {
  std::string out =
      fmt::format("{} on {} ({}, {}), context {} positions; copy bandwidth {:.0f} GB/s; step weights {:.2f} GB\n",
                  r["model"].get<std::string>(), r["device"].get<std::string>(), r["backend"].get<std::string>(),
                  r["dtype"].get<std::string>(), r["context"].get<int>(), r["copy_bandwidth_gb_s"].get<double>(),
                  r["step_weight_bytes"].get<double>() / 1e9);
  const auto& p = r["prefill"];
  out += fmt::format("prefill: {} tokens in {:.3f} s = {:.0f} tokens/s\n", p["tokens"].get<int>(),
                     p["seconds"].get<double>(), p["tokens_per_s"].get<double>());
  out += fmt::format("{:>8} {:>10} {:>10} {:>9} {:>9} {:>10} {:>12}\n", "decode B", "ms", "GB moved", "GB/s",
                     "roofline", "tokens/s", "host enqueue");
  for (const auto& d : r["decode"])
    out += fmt::format("{:>8} {:>10.3f} {:>10.2f} {:>9.0f} {:>8.0f}% {:>10.0f} {:>9.3f} ms\n", d["batch"].get<int>(),
                       d["ms"].get<double>(), d["bytes"].get<double>() / 1e9, d["gb_s"].get<double>(),
                       100 * d["roofline_fraction"].get<double>(), d["tokens_per_s"].get<double>(),
                       d["host_enqueue_ms"].get<double>());
  out += fmt::format("{:>8} {:>4} {:>10} {:>12}\n", "verify B", "K", "ms", "/ decode(B)");
  for (const auto& v : r["verify"])
    out +=
        fmt::format("{:>8} {:>4} {:>10.3f} {:>12}\n", v["batch"].get<int>(), v["k"].get<int>(), v["ms"].get<double>(),
                    v.contains("ratio_to_decode") ? fmt::format("{:.2f}x", v["ratio_to_decode"].get<double>()) : "");
  if (r.contains("propose")) {
    out += fmt::format(
        "{:>9} {:>10} {:>12}   (drafter weights {:.2f} GB, head {:.2f} GB over {} ids, --draft-matmul {})\n",
        "propose B", "ms", "/ decode(B)", r["drafter_weight_bytes"].get<double>() / 1e9,
        r["draft_head_bytes"].get<double>() / 1e9, r["draft_vocab"].get<int64_t>(),
        r["draft_matmul"].get<std::string>());
    for (const auto& v : r["propose"])
      out += fmt::format(
          "{:>9} {:>10.3f} {:>12}\n", v["batch"].get<int>(), v["ms"].get<double>(),
          v.contains("fraction_of_decode") ? fmt::format("{:.1f}%", 100 * v["fraction_of_decode"].get<double>()) : "");
  }
  if (r.contains("projection"))
    for (const auto& v : r["projection"])
      out += fmt::format("projected at tau {:.2f}, B={}: plain {:.0f} tokens/s, DFlash {:.0f} tokens/s ({:.2f}x)\n",
                         v["tau"].get<double>(), v["batch"].get<int>(), v["plain_tokens_per_s"].get<double>(),
                         v["dflash_tokens_per_s"].get<double>(), v["speedup"].get<double>());
  if (r.contains("cuda_graphs")) {
    const auto& g = r["cuda_graphs"];
    out += fmt::format(
        "CUDA graphs {}: {} launches in {} segments; {} graph launches ({} captures), {} direct, "
        "{} node updates\n",
        g["enabled"].get<bool>() ? "on" : "off", g["launches"].get<uint64_t>(), g["segments"].get<uint64_t>(),
        g["graph_launches"].get<uint64_t>(), g["captures"].get<uint64_t>(), g["direct_segments"].get<uint64_t>(),
        g["node_updates"].get<uint64_t>());
  }
  return out;
}

}  // namespace specserve::cli
