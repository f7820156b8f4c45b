// `specserve bench serve-load`: the serving benchmark. Streams requests of a workload (random,
// shared-prefix, multi-turn, capacity: server/load_generator.h) at several concurrency levels and
// reports TTFT, inter-token latency, aggregate output tokens/s and the prefix cache's hit rate.
//   specserve bench serve-load --model DIR [--draft DIR]   starts an in-process server on a free port
//   specserve bench serve-load --url http://HOST:PORT      measures a running server (specserve or a peer)
//   specserve bench serve-load --synthetic SHAPE --tokenizer DIR   in-process, random weights of a real shape
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "cli/bench_modes.h"
#include "cli/common_flags.h"
#include "cli/controlled_bench.h"
#include "cli/drafter_flags.h"
#include "cli/hidden_alias.h"
#include "cli/serve_controlled.h"
#include "core/error.h"
#include "io/model_config.h"
#include "model/synthetic_shapes.h"
#include "server/http_server.h"
#include "server/load_generator.h"
#include "server/load_rounds.h"
#include "server/loaded_model.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/step_graphs.h"
#endif

namespace specserve::cli {

namespace {

// The CUDA graph recorder's counts so far (backend/cuda/step_graphs.h), zeros without a device. Printed per
// level: on a launch-bound model a segment run launch by launch, a capture or a node given a new grid costs
// host time a plain replay does not, so these say whether steps of varying shape (draft lengths varying per
// sequence) replay their graphs.
struct GraphCounts {
  uint64_t segments = 0, graph_launches = 0, captures = 0, direct = 0, geometry_updates = 0;
};
GraphCounts graph_counts() {
#if SPECSERVE_HAVE_CUDA
  if (cuda::device_count() > 0) {
    const cuda::GraphStats g = cuda::graph_stats();
    return {g.segments, g.graph_launches, g.captures, g.direct_segments, g.geometry_updates};
  }
#endif
  return {};
}

struct LoadArgs {
  std::string url;
  server::ServeSpec spec;
  DrafterFlags drafter;
  server::LoadGeneratorOptions load;
  std::string levels = "1,4,16,64";
  std::string workload = "random";
  int max_seqs = 0;           // in-process --max-seqs; 0 = see run_serve_load
  double swap_space_gib = 4;  // in-process --swap-space-gib
  std::string acceptance;     // "": plain load; else the acceptance-controlled benchmark (cli/serve_controlled.h)
  uint64_t seed = 1;          // --acceptance: prompts, sampling seeds, corruption
  int tensor_parallel = 1;    // in-process --tensor-parallel, to spec.tensor_parallel
  int rounds = 1;             // the levels run this many times in turn (server/load_rounds.h)
  std::string synthetic;      // --synthetic SHAPE: the in-process target made with random weights
  std::string tokenizer;      // --tokenizer DIR: the tokenizer directory that --synthetic serves with
};

// --synthetic SHAPE --tokenizer DIR: the in-process server's target made with random weights of that real shape on
// the backend (no checkpoint to write or read: a 27B's would be 54 GB), served with DIR's tokenizer. Checked
// before anything loads.
void apply_synthetic(LoadArgs& a) {
  SS_CHECK(!a.synthetic.empty() || a.tokenizer.empty(),
           "--tokenizer names the tokenizer a --synthetic target serves with; a checkpoint (--model) brings its own");
  if (a.synthetic.empty()) return;
  SS_CHECK(a.spec.model_dir.empty() && a.url.empty() && a.drafter.draft.empty(),
           "--synthetic serves random weights of a real shape in-process (with a random drafter of its real drafter "
           "shape under --acceptance): drop --model, --url and --draft");
  SS_CHECK(!a.tokenizer.empty(),
           "--synthetic needs --tokenizer DIR, a directory with tokenizer.json (the server encodes and decodes text)");
  SS_CHECK(std::filesystem::exists(std::filesystem::path(a.tokenizer) / "tokenizer.json"),
           "--tokenizer {}: no tokenizer.json there", a.tokenizer);
  const SyntheticShape shape = synthetic_shape(a.synthetic);
  a.spec.model_dir = a.tokenizer;
  if (a.spec.served_model_name.empty()) a.spec.served_model_name = shape.name;
  a.spec.make_target = [config = shape.target](const LoadOptions& lo) { return TargetModel::synthetic(config, lo); };
}

std::vector<int> parse_levels(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    int v = 0;
    try {
      v = std::stoi(item);
    } catch (...) {
      fail("--concurrency: '{}' is not a number", item);
    }
    SS_CHECK(v > 0, "--concurrency: levels must be positive, got {}", v);
    out.push_back(v);
  }
  SS_CHECK(!out.empty(), "--concurrency: no levels given");
  return out;
}

void parse_url(const std::string& url, server::LoadGeneratorOptions& o) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  SS_CHECK(rest.rfind("https://", 0) != 0, "--url: https is not supported");
  auto slash = rest.find('/');
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  auto colon = rest.rfind(':');
  SS_CHECK(colon != std::string::npos, "--url must be http://HOST:PORT, got '{}'", url);
  o.host = rest.substr(0, colon);
  try {
    o.port = std::stoi(rest.substr(colon + 1));
  } catch (...) {
    fail("--url must be http://HOST:PORT, got '{}'", url);
  }
}

// The in-process server: HTTP on a free port of 127.0.0.1 (a.load points there), the model loaded. The
// caller says which services it answers with (set_ready).
struct InProcess {
  std::shared_ptr<server::ServingState> state;
  std::unique_ptr<server::HttpServer> http;
  std::shared_ptr<server::LoadedModel> model;

  void stop() {
    state->set_draining();
    model->engine().shutdown(std::chrono::seconds(0));
    http->stop();
  }
};

InProcess start_in_process(LoadArgs& a, const std::vector<int>& levels) {
  InProcess s;
  // --max-seqs 0: the capacity probe leaves the count to the server's memory rule (as `serve`
  // does); the other workloads run at least the largest level at once, so no level queues.
  const int max_level = *std::max_element(levels.begin(), levels.end());
  a.spec.engine.max_seqs = a.max_seqs;
  if (a.max_seqs == 0 && a.load.workload != server::Workload::Capacity) {
    a.spec.engine.max_seqs = std::max(16, max_level);
  }
  a.spec.engine.swap_space_bytes = static_cast<size_t>(a.swap_space_gib * double(size_t{1} << 30));
  a.spec.tensor_parallel = tensor_parallel_load_option(a.tensor_parallel);
  server::ServerOptions ho;
  ho.port = 0;
  ho.max_seqs = a.spec.engine.max_seqs;
  ho.max_queue = a.spec.engine.max_queue;
  s.state = std::make_shared<server::ServingState>();
  s.http = std::make_unique<server::HttpServer>(ho, s.state);
  a.load.port = s.http->bind();
  a.load.host = "127.0.0.1";
  s.http->start();
  if (a.synthetic.empty()) {
    std::fprintf(stderr, "bench: loading %s\n", a.spec.model_dir.c_str());
  } else {
    std::fprintf(stderr, "bench: making synthetic %s weights (tokenizer from %s)\n", a.synthetic.c_str(),
                 a.spec.model_dir.c_str());
  }
  s.model = server::LoadedModel::load(a.spec, [](double, const std::string&) {});
  return s;
}

// --acceptance: in-process, the random workload on token-id prompts, a drafter from --draft or a random
// one of the target's real drafter shape (model/synthetic_shapes.h), the draft-length policy of --draft-policy.
int run_controlled_serving(LoadArgs a, const std::vector<int>& levels) {
  const char* who = "bench serve-load --acceptance";
  SS_CHECK(a.load.workload == server::Workload::Random,
           "{}: runs the random workload (distinct token-id prompts); drop --workload {}", who,
           server::workload_name(a.load.workload));
  SS_CHECK(a.load.prompt_pattern.empty(),
           "{}: sends its own token-id prompts (distinct per request, from --seed); drop --prompt-id-pattern", who);
  ServeControlledOptions o;
  o.acceptance = parse_acceptance_list(a.acceptance);  // before any weights are read
  o.levels = levels;
  o.seed = a.seed;
  a.drafter.apply_to(a.spec);
  SS_CHECK(a.spec.engine.verify_mode == engine::VerifyMode::SampleMatch,
           "{}: outputs are checked equal to plain decoding; --verify-mode must be sample-match", who);
  o.label = a.spec.model_dir + ", drafter " + a.drafter.draft;
  if (a.drafter.draft.empty()) {
    const ModelConfig config =
        a.synthetic.empty() ? load_model_config(a.spec.model_dir) : synthetic_shape(a.synthetic).target;
    const std::optional<SyntheticShape> shape =
        a.synthetic.empty() ? synthetic_shape_for(config) : std::optional<SyntheticShape>(synthetic_shape(a.synthetic));
    SS_CHECK(shape,
             "{}: no --draft DIR, and the target (hidden size {}, {} layers, vocabulary {}) has none of the known "
             "shapes whose real drafter shape a random drafter could take (qwen3-8b, qwen3.6-27b); give --draft DIR",
             who, config.hidden_size, config.num_layers, config.vocab_size);
    a.spec.engine.draft_policy = engine::parse_draft_policy(a.drafter.draft_policy);
    a.spec.make_drafter = [drafter = shape->drafter](const TargetModel& target) {
      return spec::DFlashDrafter::synthetic(drafter, target);
    };
    o.label = (a.synthetic.empty() ? a.spec.model_dir : "synthetic " + shape->name + " (random weights)") +
              ", a random drafter of the " + shape->name + " drafter's shape";
  }
  InProcess s = start_in_process(a, levels);
  auto served = std::make_shared<RecordingServices>(s.model);
  s.state->set_ready(served);
  a.load.model = server::discover_model(a.load);
  o.load = a.load;
  std::fprintf(stderr, "bench: acceptance-controlled serving of %s\n", o.label.c_str());
  const ServeControlledResult r = run_serve_controlled(*s.model, *served, o);
  std::fputs(format_serve_controlled(r, o).c_str(), stdout);
  s.stop();
  return 0;
}

// One level's lines on stderr: throughput and latency, the CUDA graphs' counts over the level (in-process), the
// capacity probe's gauges.
void report_level(const server::LevelResult& r, const GraphCounts& after, const GraphCounts& before) {
  const int c = r.concurrency;
  std::fprintf(stderr, "bench: concurrency %d: %.1f tok/s, TTFT p50 %.1f ms, ITL p50 %.2f ms, %d errors%s\n", c,
               r.tokens_per_s, r.ttft_p50 * 1e3, r.itl_p50 * 1e3, r.errors,
               r.first_error.empty() ? "" : (" (" + r.first_error + ")").c_str());
  if (after.segments > before.segments) {
    std::fprintf(stderr,
                 "bench: concurrency %d: CUDA graphs: %llu launch segments, %llu graph replays, %llu captures, "
                 "%llu run directly, %llu nodes given a new grid\n",
                 c, static_cast<unsigned long long>(after.segments - before.segments),
                 static_cast<unsigned long long>(after.graph_launches - before.graph_launches),
                 static_cast<unsigned long long>(after.captures - before.captures),
                 static_cast<unsigned long long>(after.direct - before.direct),
                 static_cast<unsigned long long>(after.geometry_updates - before.geometry_updates));
  }
  if (r.workload == server::Workload::Capacity) {
    std::fprintf(stderr, "bench: concurrency %d: at most %.0f running, %.0f waiting, %.0f swapped (of %d sent)\n", c,
                 r.max_running, r.max_waiting, r.max_swapped, r.requests);
  }
}

int run_serve_load(LoadArgs a) {
  const std::vector<int> levels = parse_levels(a.levels);
  a.load.workload = server::parse_workload(a.workload);
  apply_synthetic(a);
  SS_CHECK(a.acceptance.empty() || a.url.empty(),
           "bench serve-load --acceptance: runs the in-process server only (its engine takes the controlled drafts); "
           "give --model DIR, not --url");
  const bool chat = a.load.workload == server::Workload::SharedPrefix || a.load.workload == server::Workload::MultiTurn;
  SS_CHECK(!chat || a.load.prompt_pattern.empty(),
           "--prompt-id-pattern: the {} workload sends chat messages (text); use random or capacity", a.workload);
  SS_CHECK(a.load.prompt_words > 0 && a.load.max_tokens > 0, "--prompt-words and --max-tokens must be positive");
  SS_CHECK(a.load.turns > 0 && a.load.turn_words > 0 && a.load.system_prompt_words > 0,
           "--turns, --turn-words and --system-prompt-words must be positive");
  SS_CHECK(a.url.empty() != a.spec.model_dir.empty(),
           "give exactly one of --model DIR, --synthetic SHAPE or --url URL");
  SS_CHECK(a.url.empty() || a.drafter.draft.empty(), "--draft starts an in-process drafter: use it with --model");
  SS_CHECK(a.rounds == 1 || a.acceptance.empty(),
           "--rounds: the acceptance-controlled benchmark (--acceptance) runs its levels once; drop one of the two");
  if (!a.acceptance.empty()) return run_controlled_serving(std::move(a), levels);
  a.drafter.check_needs_draft();
  a.drafter.apply_to(a.spec);
  std::optional<InProcess> in_process;
  if (!a.spec.model_dir.empty()) {
    in_process = start_in_process(a, levels);
    in_process->state->set_ready(in_process->model);
  } else {
    parse_url(a.url, a.load);
  }
  a.load.model = server::discover_model(a.load);
  std::fprintf(stderr, "bench: model '%s' at %s:%d, workload %s, max_tokens %d, ~%d-word prompts, T=%g\n",
               a.load.model.c_str(), a.load.host.c_str(), a.load.port, a.workload.c_str(), a.load.max_tokens,
               a.load.prompt_words, a.load.temperature);
  if (a.load.workload == server::Workload::SharedPrefix) {
    std::fprintf(stderr, "bench: shared system prompt of ~%d words (one untimed request fills the cache first)\n",
                 a.load.system_prompt_words);
  } else if (a.load.workload == server::Workload::MultiTurn) {
    std::fprintf(stderr, "bench: %s conversations of %d turns, follow-up messages of ~%d words\n",
                 a.load.conversations > 0 ? std::to_string(a.load.conversations).c_str() : "(concurrency)",
                 a.load.turns, a.load.turn_words);
  }
  std::vector<server::LevelResult> results;
  for (int round = 1; round <= a.rounds; ++round) {
    if (a.rounds > 1) std::fprintf(stderr, "bench: round %d of %d\n", round, a.rounds);
    for (int c : levels) {
      const GraphCounts before = in_process ? graph_counts() : GraphCounts{};
      results.push_back(server::run_load_level(a.load, c));
      report_level(results.back(), in_process ? graph_counts() : GraphCounts{}, before);
    }
  }
  std::fputs(server::format_results(results).c_str(), stdout);
  if (a.rounds > 1) {
    std::fprintf(stdout, "\nover %d rounds (each level's median and range; the levels ran in turn, round by round):\n",
                 a.rounds);
    std::fputs(server::format_round_summary(server::summarize_rounds(results)).c_str(), stdout);
  }
  if (in_process) in_process->stop();
  for (const auto& r : results) {
    if (r.errors > 0) return 1;
  }
  return 0;
}

}  // namespace

void register_bench_serve_load(CLI::App& bench, CommandRunner& run) {
  auto* cmd =
      bench.add_subcommand(kBenchServeLoad, "HTTP load: TTFT, inter-token latency and tokens/s per concurrency level");
  auto a = std::make_shared<LoadArgs>();
  add_model_flag(*cmd, a->spec.model_dir)->description("Serve this target model in-process and measure it");
  add_drafter_flags(*cmd, a->drafter, DrafterScope::Serving);
  cmd->add_option("--synthetic", a->synthetic,
                  "Serve a real model shape with random weights made on the backend instead of a checkpoint "
                  "(qwen3-8b, qwen3.6-27b, tiny; NAME-fp8 as in bench steps), with --tokenizer; under --acceptance "
                  "beside a random drafter of its real drafter shape");
  cmd->add_option("--tokenizer", a->tokenizer, "--synthetic: the directory whose tokenizer.json the server uses");
  cmd->add_option("--url", a->url, "Measure a running server instead (http://HOST:PORT)");
  cmd->add_option("--api-key", a->load.api_key, "Bearer key for --url");
  cmd->add_option("--served-model-name", a->load.model, "Model id to request (default: the server's first)");
  add_hidden_alias(*cmd, "--served-model", a->load.model, "--served-model-name");
  cmd->add_option("--workload", a->workload,
                  "random: distinct completion prompts; shared-prefix: one long system prompt + short distinct user "
                  "messages (chat); multi-turn: conversations resending their history and answers (chat); "
                  "capacity: every request at once, reporting the most the server runs at once")
      ->check(CLI::IsMember({"random", "shared-prefix", "multi-turn", "capacity"}))
      ->capture_default_str();
  cmd->add_option("--concurrency", a->levels, "Comma-separated concurrency levels")->capture_default_str();
  cmd->add_option("--rounds", a->rounds,
                  "Run the levels this many times in turn; with more than one, a summary gives each level's median "
                  "output tok/s and its range")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--requests", a->load.requests,
                  "Requests per level (0 = max(16, 4 x concurrency); capacity: the concurrency; multi-turn: see "
                  "--conversations)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->load.max_tokens, "Tokens generated per request")->capture_default_str();
  cmd->add_option("--prompt-words", a->load.prompt_words,
                  "Approximate prompt length in words (shared-prefix: the user message; multi-turn: the first turn)")
      ->capture_default_str();
  cmd->add_option("--system-prompt-words", a->load.system_prompt_words,
                  "shared-prefix: words of the system prompt every request shares")
      ->capture_default_str();
  cmd->add_option("--turns", a->load.turns, "multi-turn: turns per conversation")->capture_default_str();
  cmd->add_option("--turn-words", a->load.turn_words, "multi-turn: words of each follow-up user message")
      ->capture_default_str();
  cmd->add_option("--conversations", a->load.conversations,
                  "multi-turn: conversations per level, run concurrency at a time (0 = the concurrency)")
      ->capture_default_str();
  cmd->add_option("--poll-ms", a->load.poll_ms, "capacity: milliseconds between reads of /metrics")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", a->load.temperature, "Sampling temperature")->capture_default_str();
  cmd->add_option("--prompt-id-pattern", a->load.prompt_pattern,
                  "Send token-id prompts: this comma-separated id pattern repeated to --prompt-words ids "
                  "(synthetic-vocabulary models)")
      ->delimiter(',');
  add_hidden_alias(*cmd, "--prompt-ids", a->load.prompt_pattern, "--prompt-id-pattern")->delimiter(',');
  cmd->add_option("--acceptance", a->acceptance,
                  "Acceptance-controlled speculation (in-process, random workload): per level a plain pass, then "
                  "per profile a speculative pass whose drafts are the plain output corrupted to the profile (the "
                  "real drafter, --draft or a random one of the target's real drafter shape, runs every step), "
                  "outputs checked equal; prints the speed-up table. Profiles as in `bench controlled`: "
                  "geometric:1,3,6.5 is three (TAU = tokens per verify; 1: every draft wrong)")
      ->check(acceptance_list_problem);
  cmd->add_option("--seed", a->seed,
                  "--acceptance: seed of the token-id prompts, the requests' sampling and the corruption process")
      ->capture_default_str();
  add_threads_flag(*cmd, a->spec.threads);
  add_dtype_flag(*cmd, a->spec.dtype);
  add_kv_dtype_flag(*cmd, a->spec.kv_dtype);
  add_fp8_weights_flag(*cmd, a->spec.fp8_weights);
  add_backend_flag(*cmd, a->spec.backend);
  add_tensor_parallel_flag(*cmd, a->tensor_parallel, a->spec.nccl_library);
  add_prefix_cache_flags(*cmd, a->spec.engine);
  add_prefill_hold_flags(*cmd, a->spec.engine.prefill_hold_steps, a->spec.engine.prefill_hold_rows);
  cmd->add_option("--max-batch-rows", a->spec.engine.max_batch_rows, "Rows per target forward (in-process)")
      ->capture_default_str();
  cmd->add_option("--max-seqs", a->max_seqs,
                  "Sequences running at once (in-process; 0 = the largest concurrency level, at least 16; capacity: "
                  "the memory rule of serve)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--kv-cache-mib", a->spec.kv_cache_mib, "KV-cache budget in MiB (in-process; 0 = auto, as serve)")
      ->capture_default_str();
  cmd->add_option("--swap-space-gib", a->swap_space_gib, "Host swap space in GiB (in-process; as serve)")
      ->check(CLI::Range(0.0, 65536.0))
      ->capture_default_str();
  cmd->callback([&run, a] { run = [a] { return run_serve_load(*a); }; });
}

}  // namespace specserve::cli
