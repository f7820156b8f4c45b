// DFlash speculative decoding: τ (mean tokens committed per verify step) and the decode speed-up over
// plain decoding, through the engine, on the CPU (default) or with --backend cuda on the GPU (target and
// drafter).
//
//   build/bin/bench_dflash [--max-tokens N] [--repeats R] [--dtype f32|bf16|auto] [--threads N] [--backend B]
//       [--gammas 15,7,3] [--temperature T] [--repetition-penalty P] [--draft-block full|gamma] [--draft-vocab V]
//       [--fixtures DIR | --target DIR --draft DIR --prompts FILE]
//   (run from the repository root; DIR defaults to tests/fixtures/dflash)
//
// Pairs: the three fixture pairs (each with its trace's prompt), or one real pair with the prompts of
// FILE (a JSON array of strings, encoded with the target's tokenizer, or of token-id arrays).
// One request at a time, EOS ignored, seed 1. Decode time is measured from the first streamed token
// (prefill done) to the last, so it covers the drafter and the verify steps and excludes the prompt;
// speed-up = plain decode time / speculative decode time (the z-lab definition: TPOT ratio), summed
// over the prompts; each cell is the median of R rounds. τ is over all steps of all prompts. At T = 0
// (and at T > 0: position-keyed sampling) every run's output is checked identical to plain decoding,
// so a number is never reported for a wrong run.
//
// With --repetition-penalty P (≠ 1) each gamma gets a second row, "raw": drafts are the drafter's raw
// argmax, without the request's penalties (still verified losslessly) — against the default
// penalty-aware drafts (spec/draft_selection.h), to show what penalty-aware drafting buys (issue 6).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/engine.h"
#include "io/model_config.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"
#include "spec/dflash_proposer.h"
#include "spec/spec_stats.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace specserve;
using Clock = std::chrono::steady_clock;

struct Run {
  std::vector<int32_t> tokens;
  double decode_s = 0;
  std::vector<engine::SpecStep> steps;
};

struct Settings {
  int64_t max_tokens = 128;
  float temperature = 0.0f;
  float repetition_penalty = 1.0f;
  bool full_block = true;           // --draft-block full|gamma (spec/dflash_proposer.h)
  std::string draft_vocab = "all";  // --draft-vocab (spec/draft_vocabulary.h)
};

Run run_once(engine::Engine& e, const std::vector<int32_t>& prompt, const Settings& st) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.params.sampling.temperature = st.temperature;
  r.params.sampling.repetition_penalty = st.repetition_penalty;
  r.params.sampling.seed = 1;
  r.params.stop.max_tokens = st.max_tokens;
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

std::vector<std::vector<int32_t>> read_prompts(const std::string& file, const std::string& target_dir) {
  std::ifstream f(file);
  SS_CHECK(f.good(), "--prompts: cannot read {}", file);
  const auto j = nlohmann::json::parse(f);
  SS_CHECK(j.is_array() && !j.empty(), "--prompts: {} must hold a non-empty JSON array", file);
  std::vector<std::vector<int32_t>> out;
  std::optional<tokenizer::Tokenizer> tok;
  for (const auto& p : j) {
    if (p.is_array()) {
      out.push_back(p.get<std::vector<int32_t>>());
      continue;
    }
    if (!tok) tok = tokenizer::Tokenizer::load(target_dir + "/tokenizer.json");
    out.push_back(tok->encode(p.get<std::string>()));
  }
  return out;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  for (size_t i = 0; i < s.size();) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    v.push_back(std::atoi(s.substr(i, j - i).c_str()));
    i = j + 1;
  }
  return v;
}

struct Pair {
  std::string name, target, draft;
  std::vector<std::vector<int32_t>> prompts;
};

void bench_pair(const Pair& pair, const Settings& st, const std::string& dtype, int threads, const std::string& backend,
                const std::vector<int>& gammas, int repeats) {
  auto target = TargetModel::load(pair.target, {.dtype = dtype, .threads = threads, .backend = backend});
  auto drafter = spec::DFlashDrafter::load(pair.draft, *target, dtype);
  if (st.draft_vocab != "all") {
    const auto tok = tokenizer::Tokenizer::load(pair.target);
    drafter->select_vocabulary(st.draft_vocab, &tok);
    std::printf("the drafter scores %lld of %lld ids (--draft-vocab %s)\n",
                static_cast<long long>(drafter->head_rows()), static_cast<long long>(target->vocab_size()),
                st.draft_vocab.c_str());
  }
  engine::EngineOptions o;
  o.kv_blocks = 4096;
  o.max_seqs = 1;
  o.prefill_chunk = 512;

  // Engines: [0] plain, then per gamma the default (penalty-aware) drafts and, with a penalty, raw drafts.
  struct Variant {
    int gamma = 0;
    bool raw = false;
  };
  std::vector<Variant> variants = {{}};
  for (int g : gammas) {
    variants.push_back({g, false});
    if (st.repetition_penalty != 1.0f) variants.push_back({g, true});
  }
  std::vector<std::unique_ptr<spec::DFlashProposer>> proposers;
  std::vector<std::unique_ptr<engine::Engine>> engines;
  auto no_text = [](int32_t) { return std::string(); };
  for (const auto& v : variants) {
    if (v.gamma == 0) {
      engines.push_back(std::make_unique<engine::Engine>(*target, o, no_text));
      continue;
    }
    spec::DFlashProposerOptions po{.gamma = v.gamma};
    po.full_block = st.full_block;
    po.selection.raw = v.raw;
    proposers.push_back(std::make_unique<spec::DFlashProposer>(*drafter, po));
    engines.push_back(std::make_unique<engine::Engine>(*target, o, no_text, proposers.back().get()));
  }
  // Plain and speculative runs alternate, so drift in the machine's load hits both alike.
  std::vector<std::vector<double>> seconds(engines.size());
  std::vector<std::vector<engine::SpecStep>> steps(engines.size());
  std::vector<std::vector<int32_t>> reference(pair.prompts.size());
  for (int r = 0; r <= repeats; ++r) {  // round 0 warms up
    std::vector<double> round(engines.size(), 0.0);
    for (size_t p = 0; p < pair.prompts.size(); ++p) {
      for (size_t e = 0; e < engines.size(); ++e) {
        Run run = run_once(*engines[e], pair.prompts[p], st);
        if (e == 0 && r == 0) reference[p] = run.tokens;
        SS_CHECK(run.tokens == reference[p], "{}: output differs from plain decoding (prompt {})", pair.name, p);
        if (r == 1) steps[e].insert(steps[e].end(), run.steps.begin(), run.steps.end());
        round[e] += run.decode_s;
      }
    }
    if (r > 0)
      for (size_t e = 0; e < engines.size(); ++e) seconds[e].push_back(round[e]);
  }
  const double tokens = static_cast<double>(pair.prompts.size()) * static_cast<double>(st.max_tokens - 1);
  const double plain_tps = tokens / median(seconds[0]);
  for (size_t e = 1; e < engines.size(); ++e) {
    const double spec_tps = tokens / median(seconds[e]);
    const auto stats = spec::spec_stats(steps[e]);
    std::string per_pos;
    for (size_t k = 0; k < std::min<size_t>(5, stats.accept_rate_per_position.size()); ++k)
      per_pos += fmt::format("{}{:.2f}", k ? "," : "", stats.accept_rate_per_position[k]);
    std::printf("%-15s %-5s %5d %-7s %6zu %7.2f %12.0f %12.0f %8.2fx  %s\n", pair.name.c_str(), dtype.c_str(),
                variants[e].gamma, variants[e].raw ? "raw" : "aware", pair.prompts.size(), stats.tau, plain_tps,
                spec_tps, spec_tps / plain_tps, per_pos.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Settings st;
  int repeats = 5;
  std::string dtype = "f32";
  std::string root = "tests/fixtures/dflash/";
  std::string target_dir, draft_dir, prompts_file;
  std::vector<int> gammas = {15, 7, 3};
  int threads = 0;  // 0: the thread pool's default
  std::string backend = "cpu";
  constexpr const char* kUsage =
      "usage: bench_dflash [--max-tokens N] [--repeats R] [--dtype f32|bf16|auto] [--threads N] [--backend B] "
      "[--gammas 15,7,3] [--temperature T] [--repetition-penalty P] [--draft-block full|gamma] [--draft-vocab V] "
      "[--fixtures DIR | --target DIR --draft DIR --prompts FILE]\n";
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {  // every option takes a value: a lone last one is a mistake, not something to skip
      std::fprintf(stderr, "bench_dflash: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    if (a == "--max-tokens")
      st.max_tokens = std::atoll(argv[i + 1]);
    else if (a == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else if (a == "--dtype")
      dtype = argv[i + 1];
    else if (a == "--fixtures")
      root = std::string(argv[i + 1]) + "/";
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--backend")
      backend = argv[i + 1];
    else if (a == "--gammas")
      gammas = parse_list(argv[i + 1]);
    else if (a == "--temperature")
      st.temperature = std::strtof(argv[i + 1], nullptr);
    else if (a == "--repetition-penalty")
      st.repetition_penalty = std::strtof(argv[i + 1], nullptr);
    else if (a == "--target")
      target_dir = argv[i + 1];
    else if (a == "--draft")
      draft_dir = argv[i + 1];
    else if (a == "--prompts")
      prompts_file = argv[i + 1];
    else if (a == "--draft-block")
      st.full_block = std::string(argv[i + 1]) != "gamma";
    else if (a == "--draft-vocab")
      st.draft_vocab = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_dflash: unknown option %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  try {
    std::vector<Pair> pairs;
    if (!target_dir.empty()) {
      SS_CHECK(!draft_dir.empty() && !prompts_file.empty(), "--target needs --draft and --prompts");
      pairs.push_back({"pair", target_dir, draft_dir, read_prompts(prompts_file, target_dir)});
    } else {
      for (const char* name : {"dense-random", "dense-trained", "hybrid-trained"})
        pairs.push_back({name, root + name + "/target", root + name + "/draft", {trace_prompt(root + name)}});
    }
    std::printf("T %.2f, repetition penalty %.2f, %lld tokens per prompt, draft block: %s\n", st.temperature,
                st.repetition_penalty, static_cast<long long>(st.max_tokens),
                st.full_block ? "full (block_size rows)" : "gamma + 1 rows");
    std::printf("%-15s %-5s %5s %-7s %6s %7s %12s %12s %9s  %s\n", "pair", "dtype", "gamma", "drafts", "prompts", "tau",
                "plain tok/s", "dflash tok/s", "speed-up", "accept@1..5");
    for (const auto& pair : pairs) bench_pair(pair, st, dtype, threads, backend, gammas, repeats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dflash: %s\n", e.what());
    return 1;
  }
  return 0;
}
