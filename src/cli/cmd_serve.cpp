// `specserve serve`: the OpenAI-compatible HTTP server.
//
// Order matters for operators: the port is bound first, so /health answers 503 while the weights
// load (with a progress bar on a terminal); then one line with the URL says the server is ready.
// SIGINT/SIGTERM drain: new requests get 503, running ones may finish for --shutdown-grace-s
// seconds, then everything is cancelled and the process exits 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "cli/drafter_flags.h"
#include "cli/hidden_alias.h"
#include "core/log.h"
#include "server/http_server.h"
#include "server/loaded_model.h"
#include "server/progress_bar.h"

namespace specserve::cli {

namespace {

struct ServeArgs {
  server::ServeSpec spec;
  server::ServerOptions http;
  DrafterFlags drafter;       // applied to spec before loading
  double swap_space_gib = 4;  // --swap-space-gib, to spec.engine.swap_space_bytes
  int tensor_parallel = 1;    // --tensor-parallel, to spec.tensor_parallel (--nccl-library straight to spec)
};

// Blocks SIGINT/SIGTERM in this thread and every thread it creates afterwards; they are then
// received only by sigwait() in the waiter thread, never inside httplib or model code.
sigset_t block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int run_serve(ServeArgs args) {
  args.drafter.check_needs_draft();
  args.drafter.apply_to(args.spec);
  args.spec.engine.swap_space_bytes = static_cast<size_t>(args.swap_space_gib * double(size_t{1} << 30));
  args.spec.tensor_parallel = tensor_parallel_load_option(args.tensor_parallel);
  sigset_t signals = block_shutdown_signals();
  auto state = std::make_shared<server::ServingState>();
  args.http.max_seqs = args.spec.engine.max_seqs;
  args.http.max_queue = args.spec.engine.max_queue;
  args.http.request_timeout_s = args.spec.request_timeout_s;
  server::HttpServer http(args.http, state);
  const int port = http.bind();
  http.start();
  const std::string url = fmt::format("http://{}:{}", args.http.host, port);
  std::fprintf(stderr, "specserve: listening on %s (GET /health is 503 until the model is loaded)\n", url.c_str());

  // The signal waiter: during loading a signal exits at once; afterwards it starts the drain.
  enum Phase { kLoading, kServing, kFailed };
  std::atomic<int> phase{kLoading};
  std::atomic<int> received{0};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    received = sig;
    if (phase.load() == kLoading) {
      std::fprintf(stderr, "\nspecserve: signal %d while loading; exiting\n", sig);
      std::_Exit(128 + sig);
    }
  });

  std::shared_ptr<server::LoadedModel> model;
  try {
    server::ProgressBar bar("loading " + args.spec.model_dir);
    model = server::LoadedModel::load(args.spec, [&](double f, const std::string& what) {
      state->set_progress(f, what);
      bar.update(f, what);
    });
    bar.finish("loaded");
  } catch (const Error& e) {
    state->set_failed(e.what());
    phase = kFailed;
    http.stop();
    pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter, which just returns
    waiter.join();
    throw;
  }
  state->set_ready(model);
  phase = kServing;
  const auto& info = model->info();
  const std::string spec_note = info.speculative ? fmt::format(", DFlash gamma {}", info.gamma) : "";
  std::fprintf(stdout, "specserve ready: %s  (model '%s', context %lld tokens%s)\n", url.c_str(), info.id.c_str(),
               static_cast<long long>(info.context_length), spec_note.c_str());
  std::fprintf(stdout,
               "  try: curl %s/v1/completions -H 'Content-Type: application/json'%s -d '{\"model\": \"%s\", "
               "\"prompt\": \"def fib(n):\\n\", \"max_tokens\": 64, \"temperature\": 0}'\n",
               url.c_str(), args.http.api_key.empty() ? "" : " -H 'Authorization: Bearer $KEY'", info.id.c_str());
  std::fflush(stdout);

  waiter.join();  // until SIGINT / SIGTERM
  std::fprintf(stderr, "specserve: signal %d, draining (up to %ds)\n", received.load(), args.http.shutdown_grace_s);
  state->set_draining();
  http.begin_shutdown();  // stop accepting; close idle and half-received connections now
  model->engine().shutdown(std::chrono::seconds(args.http.shutdown_grace_s));
  http.stop();
  std::fprintf(stderr, "specserve: stopped\n");
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, CommandRunner& run) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over the OpenAI HTTP API (chat, completions, SSE, metrics)");
  auto args = std::make_shared<ServeArgs>();
  auto& s = args->spec;
  auto& h = args->http;
  add_model_flag(*cmd, s.model_dir)->required();
  add_drafter_flags(*cmd, args->drafter, DrafterScope::Serving);
  cmd->add_option("--host", h.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", h.port, "Port (0 = any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", s.served_model_name, "Model id in the API (default: the directory name)");
  cmd->add_option("--api-key", h.api_key, "Require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize")
      ->envname("SPECSERVE_API_KEY");
  cmd->add_option("--api-key-file", h.api_key_file, "Read the API key from this file (first line; not visible in ps)");
  cmd->add_option("--allowed-origins", h.allowed_origins,
                  "Answer CORS requests from these origins ('*' = any; default none)")
      ->delimiter(',');
  cmd->add_option("--max-connections", h.max_connections,
                  "Open connections; a new one above this gets 503 and is closed")
      ->capture_default_str();
  cmd->add_option("--header-timeout-s", h.header_timeout_s,
                  "Seconds a request head may take to arrive, from its first byte")
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout-s", h.keep_alive_timeout_s, "Seconds an idle keep-alive connection stays open")
      ->capture_default_str();
  s.engine.max_seqs = 0;  // auto (engine/memory_plan.h)
  cmd->add_option("--max-seqs", s.engine.max_seqs,
                  "Sequences running at once (0 = auto: on a GPU as many as the memory left after the weights holds "
                  "at a DeltaNet state slot + drafter state + the KV of a 2,048-position sequence each, at most "
                  "1024; on the CPU 16)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--swap-space-gib", args->swap_space_gib,
                  "Host memory in GiB (pinned on a GPU) for sequences preempted when KV blocks run out; they resume "
                  "exactly where they stopped. 0 = no preemption: requests are admitted only while their worst case "
                  "fits")
      ->check(CLI::Range(0.0, 65536.0))
      ->capture_default_str();
  add_prefix_cache_flags(*cmd, s.engine);
  add_prefill_hold_flags(*cmd, s.engine.prefill_hold_steps, s.engine.prefill_hold_rows);
  cmd->add_option("--max-queue", s.engine.max_queue, "Requests waiting for admission before 503")
      ->capture_default_str();
  cmd->add_option("--max-batch-rows", s.engine.max_batch_rows, "Rows of one target forward")->capture_default_str();
  cmd->add_option("--prefill-chunk", s.engine.prefill_chunk, "Prefill chunk length (multiple of 64)")
      ->capture_default_str();
  cmd->add_option(
         "--kv-cache-mib", s.kv_cache_mib,
         "KV-cache budget in MiB, target + drafter (0 = auto: on a GPU what is free after the weights, the sequences' state and activations; on the CPU max-seqs full contexts, <= 1/4 of RAM)")
      ->capture_default_str();
  add_threads_flag(*cmd, s.threads);
  add_dtype_flag(*cmd, s.dtype);
  add_kv_dtype_flag(*cmd, s.kv_dtype);
  add_fp8_weights_flag(*cmd, s.fp8_weights);
  add_tensor_parallel_flag(*cmd, args->tensor_parallel, args->spec.nccl_library);
  add_backend_flag(*cmd, s.backend);
  cmd->add_option("--max-tokens-limit", h.max_tokens_limit, "Largest max_tokens accepted (0 = the context length)");
  cmd->add_option("--default-max-tokens", h.default_max_tokens,
                  "max_tokens when a request gives none (capped by what fits; 0 = what fits)")
      ->capture_default_str();
  cmd->add_option("--max-prompt-tokens", h.max_prompt_tokens, "Longest prompt accepted (0 = the context length)");
  cmd->add_option_function<int64_t>(
         "--max-body-mib", [&h](const int64_t& mib) { h.max_body_bytes = static_cast<size_t>(mib) << 20; },
         "Largest request body in MiB (413 above; default 8)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--request-timeout-s", s.request_timeout_s,
                  "Cancel a request still running after N seconds (0 = never)")
      ->capture_default_str();
  add_hidden_alias(*cmd, "--request-timeout", s.request_timeout_s, "--request-timeout-s");
  cmd->add_option("--http-threads", h.http_threads, "Request handler threads (JSON, template, tokenizer; 0 = 4)");
  cmd->add_option("--read-timeout-s", h.read_timeout_s, "Seconds a request body may take to arrive after its head")
      ->capture_default_str();
  add_hidden_alias(*cmd, "--read-timeout", h.read_timeout_s, "--read-timeout-s");
  cmd->add_option("--write-timeout-s", h.write_timeout_s,
                  "Seconds a response write may make no progress before the connection closes")
      ->capture_default_str();
  add_hidden_alias(*cmd, "--write-timeout", h.write_timeout_s, "--write-timeout-s");
  cmd->add_option("--shutdown-grace-s", h.shutdown_grace_s, "Seconds running requests may finish after SIGTERM")
      ->capture_default_str();
  add_hidden_alias(*cmd, "--shutdown-grace", h.shutdown_grace_s, "--shutdown-grace-s");
  cmd->callback([&run, args] { run = [args] { return run_serve(*args); }; });
}

}  // namespace specserve::cli
