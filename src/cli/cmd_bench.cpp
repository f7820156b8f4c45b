// `specserve bench`: the serving benchmark. Streams /v1/completions requests at several
// concurrency levels and reports TTFT, inter-token latency and aggregate output tokens/s.
//   specserve bench --model DIR [--draft DIR]   starts an in-process server on a free port
//   specserve bench --url http://HOST:PORT      measures a running server (specserve or a peer)
//   specserve bench --synthetic SHAPE           step times on a real shape with random weights
//   specserve bench --model DIR [--draft DIR] --steps   the same on a checkpoint (cli/step_bench.h)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/step_bench.h"
#include "core/error.h"
#include "model/synthetic_shapes.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"
#include "spec/draft_vocabulary.h"
#include "server/http_server.h"
#include "server/load_generator.h"
#include "server/loaded_model.h"

namespace specserve::cli {

namespace {

struct BenchArgs {
  std::string url;
  server::ServeSpec spec;
  server::LoadOptions load;
  std::string levels = "1,4,16,64";
  // Step benchmark (cli/step_bench.h).
  std::string synthetic;
  bool steps = false;
  bool json = false;
  std::string dtype = "auto";
  StepBenchOptions step;
};

// `bench --synthetic SHAPE` or `bench --model DIR --steps`: step times, bytes and roofline.
int run_step_bench_command(const BenchArgs& a) {
  LoadOptions lo;
  lo.dtype = a.dtype;
  lo.threads = a.spec.threads;
  lo.backend = a.spec.backend;
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<spec::DFlashDrafter> drafter;
  std::string label;
  if (!a.synthetic.empty()) {
    SS_CHECK(a.spec.model_dir.empty() && a.url.empty(), "--synthetic replaces --model and --url");
    const SyntheticShape shape = synthetic_shape(a.synthetic);
    std::fprintf(stderr, "bench: making synthetic %s weights\n", shape.name.c_str());
    target = TargetModel::synthetic(shape.target, lo);
    drafter = spec::DFlashDrafter::synthetic(shape.drafter, *target);
    label = "synthetic " + shape.name;
  } else {
    SS_CHECK(!a.spec.model_dir.empty(), "--steps needs --model DIR");
    target = TargetModel::load(a.spec.model_dir, lo);
    if (!a.spec.draft_dir.empty()) drafter = spec::DFlashDrafter::load(a.spec.draft_dir, *target, a.dtype);
    label = a.spec.model_dir;
  }
  if (drafter) {
    drafter->set_matmul_order(a.spec.draft_matmul);
    if (a.spec.draft_vocab != "all") {
      // The EOS ids join; a checkpoint with a tokenizer adds its added tokens.
      std::optional<tokenizer::Tokenizer> tok;
      if (a.synthetic.empty() && std::filesystem::exists(std::filesystem::path(a.spec.model_dir) / "tokenizer.json"))
        tok = tokenizer::Tokenizer::load(a.spec.model_dir);
      drafter->select_vocabulary(a.spec.draft_vocab, tok ? &*tok : nullptr);
    }
  }
  const nlohmann::json r = run_step_bench(*target, drafter.get(), label, a.step);
  std::fputs(a.json ? (r.dump(2) + "\n").c_str() : format_step_bench(r).c_str(), stdout);
  return 0;
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

void parse_url(const std::string& url, server::LoadOptions& o) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  SS_CHECK(rest.rfind("https://", 0) != 0, "--url: https is not supported");
  auto slash = rest.find('/');
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  auto colon = rest.rfind(':');
  SS_CHECK(colon != std::string::npos, "--url must be http://HOST:PORT, got '{}'", url);
  o.host = rest.substr(0, colon);
  o.port = std::stoi(rest.substr(colon + 1));
}

int run_bench(BenchArgs a) {
  if (!a.synthetic.empty() || a.steps) return run_step_bench_command(a);
  const std::vector<int> levels = parse_levels(a.levels);
  SS_CHECK(a.url.empty() != a.spec.model_dir.empty(), "give exactly one of --model DIR or --url URL");
  std::shared_ptr<server::ServingState> state;
  std::unique_ptr<server::HttpServer> http;
  std::shared_ptr<server::LoadedModel> model;
  if (!a.spec.model_dir.empty()) {
    const int max_level = *std::max_element(levels.begin(), levels.end());
    if (a.spec.engine.max_seqs < max_level) a.spec.engine.max_seqs = max_level;
    server::ServerOptions ho;
    ho.port = 0;
    ho.max_seqs = a.spec.engine.max_seqs;
    ho.max_queue = a.spec.engine.max_queue;
    state = std::make_shared<server::ServingState>();
    http = std::make_unique<server::HttpServer>(ho, state);
    a.load.port = http->bind();
    a.load.host = "127.0.0.1";
    http->start();
    std::fprintf(stderr, "bench: loading %s\n", a.spec.model_dir.c_str());
    model = server::LoadedModel::load(a.spec, [](double, const std::string&) {});
    state->set_ready(model);
  } else {
    parse_url(a.url, a.load);
  }
  a.load.model = server::discover_model(a.load);
  std::fprintf(stderr, "bench: model '%s' at %s:%d, max_tokens %d, ~%d-word prompts, T=%g\n", a.load.model.c_str(),
               a.load.host.c_str(), a.load.port, a.load.max_tokens, a.load.prompt_words, a.load.temperature);
  std::vector<server::LevelResult> results;
  for (int c : levels) {
    results.push_back(server::run_load_level(a.load, c));
    const auto& r = results.back();
    std::fprintf(stderr, "bench: concurrency %d: %.1f tok/s, TTFT p50 %.1f ms, ITL p50 %.2f ms, %d errors%s\n", c,
                 r.tokens_per_s, r.ttft_p50 * 1e3, r.itl_p50 * 1e3, r.errors,
                 r.first_error.empty() ? "" : (" (" + r.first_error + ")").c_str());
  }
  std::fputs(server::format_results(results).c_str(), stdout);
  if (http) {
    state->set_draining();
    model->engine().shutdown(std::chrono::seconds(0));
    http->stop();
  }
  for (const auto& r : results) {
    if (r.errors > 0) return 1;
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, CommandRunner& run) {
  auto* cmd = app.add_subcommand("bench", "Serving benchmark: TTFT, inter-token latency and tokens/s per concurrency");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--model", a->spec.model_dir, "Serve this model in-process and measure it");
  cmd->add_option("--draft", a->spec.draft_dir, "DFlash drafter for the in-process server");
  cmd->add_option("--url", a->url, "Measure a running server instead (http://HOST:PORT)");
  cmd->add_option("--api-key", a->load.api_key, "Bearer key for --url");
  cmd->add_option("--served-model", a->load.model, "Model id to request (default: the server's first)");
  cmd->add_option("--concurrency", a->levels, "Comma-separated concurrency levels")->capture_default_str();
  cmd->add_option("--requests", a->load.requests, "Requests per level (0 = max(16, 4 x concurrency))")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->load.max_tokens, "Tokens generated per request")->capture_default_str();
  cmd->add_option("--prompt-words", a->load.prompt_words, "Approximate prompt length in words")->capture_default_str();
  cmd->add_option("--temperature", a->load.temperature, "Sampling temperature")->capture_default_str();
  cmd->add_option("--prompt-ids", a->load.prompt_pattern,
                  "Send token-id prompts: this id pattern repeated to --prompt-words ids (synthetic-vocabulary models)")
      ->delimiter(',');
  cmd->add_option("--gamma", a->spec.engine.gamma, "Draft tokens per verify (with --draft)");
  cmd->add_option("--spec-max-batch", a->spec.engine.spec_max_batch,
                  "Speculate only while at most N sequences decode (with --draft; 0 = always)");
  cmd->add_option_function<std::string>(
      "--draft-sampling", [a](const std::string& v) { a->spec.draft_sampling = spec::parse_draft_sampling(v); },
      "argmax or sample (with --draft)");
  cmd->add_option_function<std::string>(
      "--draft-matmul", [a](const std::string& v) { a->spec.draft_matmul = spec::parse_draft_matmul(v); },
      spec::kDraftMatmulHelp);
  cmd->add_option("--draft-vocab", a->spec.draft_vocab,
                  std::string(spec::kDraftVocabHelp) + " (with --draft; --synthetic: all or N)")
      ->capture_default_str();
  cmd->add_option("--threads", a->spec.threads, "CPU threads for the in-process model (0 = all)");
  cmd->add_option("--backend", a->spec.backend,
                  "Where the in-process target and drafter run: auto (cuda when a GPU is usable), cpu or cuda (GPU 0)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--max-batch-rows", a->spec.engine.max_batch_rows, "Rows per target forward (in-process)");
  // Step benchmark.
  cmd->add_option("--synthetic", a->synthetic,
                  "Step benchmark on a real model shape with random weights made on the device: qwen3-8b, "
                  "qwen3.6-27b (= qwen3.5-27b) or tiny, with its z-lab drafter shape");
  cmd->add_flag("--steps", a->steps, "Step benchmark of --model DIR [--draft DIR] instead of the serving benchmark");
  cmd->add_option("--context", a->step.context, "Step benchmark: positions per sequence")->capture_default_str();
  cmd->add_option("--prefill", a->step.prefill, "Step benchmark: prefill length")->capture_default_str();
  cmd->add_option("--iterations", a->step.iterations, "Step benchmark: timed calls per measurement (median)")
      ->capture_default_str();
  cmd->add_option("--tau", a->step.tau, "Step benchmark: acceptance length for the projected tokens/s")
      ->capture_default_str();
  cmd->add_option("--decode-batches", a->step.decode_batches, "Step benchmark: decode batch sizes")->delimiter(',');
  cmd->add_option("--verify-batches", a->step.verify_batches, "Step benchmark: verify/propose batch sizes")
      ->delimiter(',');
  cmd->add_option("--verify-k", a->step.verify_ks, "Step benchmark: verify rows per sequence")->delimiter(',');
  cmd->add_option("--dtype", a->dtype, "Step benchmark: weight storage (auto, f32, bf16)")->capture_default_str();
  cmd->add_flag("--json", a->json, "Step benchmark: print JSON instead of tables");
  cmd->callback([&run, a] { run = [a] { return run_bench(*a); }; });
}

}  // namespace specserve::cli
