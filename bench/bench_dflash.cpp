// DFlash speculative decoding on the CPU: τ (mean tokens committed per verify step) and the decode
// speed-up over plain decoding, for the fixture pairs (tests/fixtures/dflash), through the engine.
//
//   build/bin/bench_dflash [--max-tokens N] [--repeats R] [--dtype f32|bf16] [--fixtures DIR] [--threads N]
//   (run from the repository root; DIR defaults to tests/fixtures/dflash)
//
// Per pair: the trace's prompt, T = 0, EOS ignored, one request at a time. Decode time is measured
// from the first streamed token (prefill done) to the last, so it covers the drafter and the verify
// steps and excludes the prompt; speed-up = plain decode time / speculative decode time (the z-lab
// definition: TPOT ratio). Each cell is the median of R runs. The outputs are checked identical to
// plain decoding on every run (the lossless promise), so a number is never reported for a wrong run.
//
// The fixture models are tiny (hidden 128, vocab 384): a forward costs about as much in fixed per-step
// work as in arithmetic, so these ratios say how the loop's overheads trade against τ on the CPU, not
// what a real 4B/8B pair gains (there verify rows are nearly free next to a memory-bound decode).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"
#include "engine/engine.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"
#include "spec/dflash_proposer.h"
#include "spec/spec_stats.h"

namespace {

using namespace specserve;
using Clock = std::chrono::steady_clock;

struct Run {
  std::vector<int32_t> tokens;
  double decode_s = 0;
  std::vector<engine::SpecStep> steps;
};

Run run_once(engine::Engine& e, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.params.sampling.temperature = 0.0f;
  r.params.stop.max_tokens = max_tokens;
  r.params.stop.ignore_eos = true;
  auto steps = std::make_shared<std::vector<engine::SpecStep>>();
  r.on_step = [steps](const engine::SpecStep& s) { steps->push_back(s); };
  auto stream = e.submit(std::move(r));
  Run run;
  Clock::time_point first{}, last{};
  std::vector<engine::StreamEvent> events;
  for (bool done = false; !done;) {
    events.clear();
    stream->wait(events, std::chrono::milliseconds(1000));
    const auto now = Clock::now();
    for (auto& ev : events) {
      if (!ev.tokens.empty() && run.tokens.empty()) first = now;
      run.tokens.insert(run.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) {
        SS_CHECK(ev.error.empty(), "request failed: {}", ev.error);
        last = now;
        done = true;
      }
    }
  }
  run.decode_s = std::chrono::duration<double>(last - first).count();
  run.steps = std::move(*steps);
  return run;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int32_t> trace_prompt(const std::string& dir) {
  std::ifstream f(dir + "/trace.json");
  return nlohmann::json::parse(f).at("prompt_ids").get<std::vector<int32_t>>();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_tokens = 128;
  int repeats = 5;
  std::string dtype = "f32";
  std::string root = "tests/fixtures/dflash/";
  int threads = 0;  // 0: the thread pool's default
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--max-tokens") max_tokens = std::atoll(argv[i + 1]);
    else if (a == "--repeats") repeats = std::atoi(argv[i + 1]);
    else if (a == "--dtype") dtype = argv[i + 1];
    else if (a == "--fixtures") root = std::string(argv[i + 1]) + "/";
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_dflash [--max-tokens N] [--repeats R] [--dtype f32|bf16] [--fixtures DIR] [--threads N]\n");
      return 2;
    }
  }
  try {
    std::printf("%-15s %-5s %5s %6s %7s %12s %12s %9s\n", "pair", "dtype", "gamma", "tokens", "tau", "plain tok/s",
                "dflash tok/s", "speed-up");
    for (const char* pair : {"dense-random", "dense-trained", "hybrid-trained"}) {
      auto target = TargetModel::load(root + pair + "/target", {.dtype = dtype, .threads = threads});
      auto drafter = spec::DFlashDrafter::load(root + std::string(pair) + "/draft", *target, dtype);
      const auto prompt = trace_prompt(root + pair);
      engine::EngineOptions o;
      o.kv_blocks = 1024;
      o.max_seqs = 1;

      // Plain and speculative runs alternate, so drift in the machine's load hits both alike.
      const std::vector<int> gammas = {15, 7, 3};
      std::vector<std::unique_ptr<spec::DFlashProposer>> proposers;
      std::vector<std::unique_ptr<engine::Engine>> engines;  // [0] plain, then one per gamma
      auto no_text = [](int32_t) { return std::string(); };
      engines.push_back(std::make_unique<engine::Engine>(*target, o, no_text));
      for (int g : gammas) {
        proposers.push_back(std::make_unique<spec::DFlashProposer>(*drafter, spec::DFlashProposerOptions{.gamma = g}));
        engines.push_back(std::make_unique<engine::Engine>(*target, o, no_text, proposers.back().get()));
      }
      std::vector<std::vector<double>> seconds(engines.size());
      std::vector<double> tau(engines.size(), 1.0);
      std::vector<int32_t> reference;
      for (int r = 0; r <= repeats; ++r) {  // round 0 warms up
        for (size_t e = 0; e < engines.size(); ++e) {
          Run run = run_once(*engines[e], prompt, max_tokens);
          if (e == 0 && r == 0) reference = run.tokens;
          SS_CHECK(run.tokens == reference, "{}: output differs from plain decoding", pair);
          if (e > 0) tau[e] = spec::spec_stats(run.steps).tau;
          if (r > 0) seconds[e].push_back(run.decode_s);
        }
      }
      const double plain_tps = double(max_tokens - 1) / median(seconds[0]);
      for (size_t e = 1; e < engines.size(); ++e) {
        const double spec_tps = double(max_tokens - 1) / median(seconds[e]);
        std::printf("%-15s %-5s %5d %6lld %7.2f %12.0f %12.0f %8.2fx\n", pair, dtype.c_str(), gammas[e - 1],
                    static_cast<long long>(max_tokens), tau[e], plain_tps, spec_tps, spec_tps / plain_tps);
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dflash: %s\n", e.what());
    return 1;
  }
  return 0;
}
