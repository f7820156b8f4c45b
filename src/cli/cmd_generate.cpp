// `specserve generate`: one prompt through the engine — plain decoding, or DFlash speculative
// decoding with --draft — on the GPU when one is usable (--backend auto, the default) or on the CPU.
//
//   specserve generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3 | --prompt-file F) [--chat]
//       --max-tokens N [--temperature T] [--seed S] [--ignore-eos] [--json] [--threads N] [--dtype D] [--kv-dtype D]
//       [--fp8-weights keep|dequantise]
//       [--backend auto|cpu|cuda]
//       [--draft DIR [--gamma G] [--draft-sampling argmax|sample] [--draft-matmul fast|exact] [--draft-vocab V]
//        [--verify-mode sample-match|raw-argmax] [--trace]]
//
// --json prints one object (a stable interface: external checks read it):
//   {"token_ids":[generated ids], "text":"...", "finish_reason":"length"|"stop",
//    "stats":{"prompt_tokens":n,"generated_tokens":n,"prefill_ms":x,"decode_ms":x,"tokens_per_s":x}}
// token_ids include a final EOS / stop token (it adds no text). prefill_ms runs to the first token,
// decode_ms from there to the end, tokens_per_s = (generated_tokens − 1) / decode time.
// With --draft, "stats" adds "steps" (verify steps), "accepted_total", "tau" (mean tokens committed
// per step) and "accept_rate_per_position"; --trace adds "steps":[{"pos","drafts","accepted","emitted"}]
// (spec/spec_json.h). Outputs with and without --draft are identical at T=0 and at seeded T>0
// (--draft-sampling argmax, --verify-mode sample-match: the defaults).
// `text` is omitted when DIR has no tokenizer.json (then only --prompt-ids works). The temperature defaults to 0
// (greedy, ties to the lowest id) whatever generation_config.json says, so a bare command is deterministic; the other
// sampling defaults come from generation_config.json.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/common_flags.h"
#include "cli/drafter_flags.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "engine/run_request.h"
#include "model/kv_cache.h"
#include "model/target_model.h"
#include "sampling/cli_flags.h"
#include "sampling/generation_config.h"
#include "spec/dflash_drafter.h"
#include "spec/draft_vocabulary.h"
#include "spec/dflash_proposer.h"
#include "spec/spec_json.h"
#include "tokenizer/tokenizer.h"

namespace specserve::cli {

namespace {

// Prefill chunk: a multiple of the DeltaNet chunk (64) so chunk boundaries depend only on the prompt.
constexpr size_t kPrefillChunk = 512;

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  std::string prompt_file;
  std::string dtype = "auto";
  std::string kv_dtype = "auto";
  std::string fp8_weights = "dequantise";
  std::string backend = "auto";
  int tensor_parallel = 1;
  std::string nccl_library;
  bool chat = false;
  bool json = false;
  int threads = 0;
  sampling::SamplingFlags sampling;
  DrafterFlags drafter;  // speculative decoding (cli/drafter_flags.h)
  bool trace = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int32_t id = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    SS_CHECK(!item.empty() && ec == std::errc() && end == item.data() + item.size() && id >= 0,
             "--prompt-ids: '{}' is not a token id", item);
    ids.push_back(id);
    i = j + 1;
  }
  SS_CHECK(!ids.empty(), "--prompt-ids is empty");
  return ids;
}

sampling::RequestParams model_defaults(const std::string& dir, const ModelConfig& cfg) {
  sampling::RequestParams d;
  for (int64_t id : cfg.eos_token_ids) d.stop.eos_token_ids.push_back(static_cast<sampling::TokenId>(id));
  const std::string gen = dir + "/generation_config.json";
  if (std::filesystem::exists(gen)) {
    std::ifstream f(gen);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: {}", gen, e.what());
    }
    sampling::apply_generation_config(j, d);
  }
  d.sampling.temperature = 0.0f;  // greedy unless --temperature is given
  return d;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SS_CHECK(f.good(), "--prompt-file: cannot read '{}'", path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int run_generate(GenerateOptions& o) {
  o.drafter.check_needs_draft();
  const int sources = !o.prompt.empty() + !o.prompt_ids.empty() + !o.prompt_file.empty();
  SS_CHECK(sources == 1, "give exactly one of --prompt, --prompt-ids or --prompt-file");
  SS_CHECK(!o.chat || o.prompt_ids.empty(), "--chat takes --prompt or --prompt-file, not --prompt-ids");
  std::optional<tokenizer::Tokenizer> tok;
  if (std::filesystem::exists(std::filesystem::path(o.model) / "tokenizer.json"))
    tok = tokenizer::Tokenizer::load(std::filesystem::path(o.model) / "tokenizer.json");
  std::vector<int32_t> prompt;
  if (!o.prompt_ids.empty()) {
    prompt = parse_ids(o.prompt_ids);
  } else {
    SS_CHECK(tok.has_value(), "--prompt and --prompt-file need {}/tokenizer.json; use --prompt-ids", o.model);
    std::string text = o.prompt.empty() ? read_file(o.prompt_file) : o.prompt;
    if (o.chat) {
      // One user message through the checkpoint's own template, with the generation prompt.
      nlohmann::ordered_json request;
      request["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}});
      request["add_generation_prompt"] = true;
      text = chat::ChatTemplate::load(o.model).render(request);
    }
    prompt = tok->encode(text);
    SS_CHECK(!prompt.empty(), "the prompt encodes to no tokens");
  }

  LoadOptions load{o.dtype, o.threads};
  load.backend = o.backend;
  load.kv_dtype = o.kv_dtype;
  load.fp8_weights = o.fp8_weights;
  load.tensor_parallel = tensor_parallel_load_option(o.tensor_parallel);
  load.nccl_library = o.nccl_library;
  auto model = TargetModel::load(o.model, load);
  sampling::RequestParams params = o.sampling.resolve(model_defaults(o.model, model->config()));
  SS_CHECK(params.stop.max_tokens.has_value() && *params.stop.max_tokens > 0, "--max-tokens must be given and > 0");
  SS_CHECK(params.stop.stop.empty() || tok.has_value(), "--stop strings need {}/tokenizer.json", o.model);
  for (int32_t id : prompt)
    SS_CHECK(id < model->vocab_size(), "--prompt-ids: {} is outside the vocabulary [0, {})", id, model->vocab_size());

  // Rows past the tokenizer's ids are padding (docs/MODELS.md §2.3): never picked.
  const int64_t real_vocab = tok ? std::min<int64_t>(tok->id_limit(), model->vocab_size()) : 0;

  std::unique_ptr<spec::DFlashDrafter> drafter;
  std::unique_ptr<spec::DFlashProposer> proposer;
  const DrafterFlags& d = o.drafter;
  const engine::VerifyMode verify_mode = engine::parse_verify_mode(d.verify_mode);
  if (!d.draft.empty()) {
    drafter = spec::DFlashDrafter::load(d.draft, *model, o.dtype);  // checks the pairing
    drafter->set_matmul_order(spec::parse_draft_matmul(d.draft_matmul));
    drafter->select_vocabulary(d.draft_vocab, tok ? &*tok : nullptr);
    proposer = std::make_unique<spec::DFlashProposer>(
        *drafter, spec::proposer_options(d.gamma, spec::parse_draft_sampling(d.draft_sampling), verify_mode));
  } else {
    SS_CHECK(!o.trace, "--trace needs --draft DIR (a DFlash drafter)");
  }

  // One sequence: KV blocks for the prompt, max_tokens and one verify block beyond.
  engine::EngineOptions eo;
  eo.max_seqs = 1;
  eo.max_queue = 1;
  eo.prefill_chunk = kPrefillChunk;
  eo.verify_mode = verify_mode;
  eo.real_vocab = real_vocab;
  const int64_t positions =
      static_cast<int64_t>(prompt.size()) + *params.stop.max_tokens + (proposer ? proposer->gamma() + 1 : 0);
  eo.kv_blocks = (positions + kKvBlockSize - 1) / kKvBlockSize + 1;
  // Special tokens add no text (as HF decode with skip_special_tokens); without a tokenizer, none.
  engine::Engine eng(
      *model, eo,
      [t = tok ? &*tok : nullptr](int32_t id) {
        return t && !t->is_special(id) ? std::string(t->token_bytes(id)) : std::string();
      },
      proposer.get());

  engine::GenerationRequest request;
  request.prompt = prompt;
  request.params = params;
  const engine::RequestRun run = engine::run_request(eng, std::move(request));
  eng.shutdown(std::chrono::milliseconds(0));
  SS_CHECK(run.finish_reason != engine::FinishReason::Error, "generation failed: {}", run.error);

  const size_t n = run.tokens.size();
  const double prefill_ms = run.first_token_ms;
  const double decode_ms = run.total_ms - run.first_token_ms;
  const double tps = decode_ms > 0 && n > 1 ? static_cast<double>(n - 1) * 1000.0 / decode_ms : 0.0;
  const std::string finish(engine::finish_reason_name(run.finish_reason));

  if (o.json) {
    nlohmann::ordered_json j;
    j["token_ids"] = run.tokens;
    if (tok) j["text"] = run.text;
    j["finish_reason"] = finish;
    j["stats"] = {{"prompt_tokens", prompt.size()},
                  {"generated_tokens", n},
                  {"prefill_ms", prefill_ms},
                  {"decode_ms", decode_ms},
                  {"tokens_per_s", tps}};
    if (proposer) {
      j["stats"]["gamma"] = proposer->gamma();
      spec::add_spec_json(run.steps, o.trace, j);
    }
    // Invalid UTF-8 (a multi-byte character cut by max_tokens) becomes U+FFFD, as in HF decode.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  if (tok) {
    std::printf("%s\n", run.text.c_str());
  } else {
    std::string ids;
    for (int32_t t : run.tokens) ids += (ids.empty() ? "" : " ") + std::to_string(t);
    std::printf("%s\n", ids.c_str());
  }
  std::fflush(stdout);  // the text first, then the stats line on stderr
  std::string spec_note;
  if (proposer) {
    int64_t committed = 0;
    for (const auto& st : run.steps) committed += static_cast<int64_t>(st.emitted.size());
    spec_note = fmt::format("; DFlash gamma {}: {} verify steps, tau {:.2f}", proposer->gamma(), run.steps.size(),
                            run.steps.empty() ? 0.0 : static_cast<double>(committed) / run.steps.size());
  }
  std::fprintf(stderr, "[%s] prompt %zu tokens, generated %zu; prefill %.1f ms, decode %.1f ms (%.2f tokens/s)%s\n",
               finish.c_str(), prompt.size(), n, prefill_ms, decode_ms, tps, spec_note.c_str());
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of one prompt (DFlash speculation with --draft)");
  add_model_flag(*cmd, opts->model)->required();
  cmd->add_option("--prompt", opts->prompt, "Prompt text (needs a tokenizer)");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt token ids, comma-separated");
  cmd->add_option("--prompt-file", opts->prompt_file, "File holding the prompt text (needs a tokenizer)");
  cmd->add_flag("--chat", opts->chat, "Render the prompt as one user message with the model's chat template");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  add_threads_flag(*cmd, opts->threads);
  add_dtype_flag(*cmd, opts->dtype);
  add_kv_dtype_flag(*cmd, opts->kv_dtype);
  add_fp8_weights_flag(*cmd, opts->fp8_weights);
  add_backend_flag(*cmd, opts->backend);
  add_tensor_parallel_flag(*cmd, opts->tensor_parallel, opts->nccl_library);
  opts->sampling.add_to(*cmd);
  add_drafter_flags(*cmd, opts->drafter, DrafterScope::Generate);
  cmd->add_flag("--trace", opts->trace, "With --json: every verify step's drafts, acceptance and emitted tokens");
  cmd->callback([&run, opts] { run = [opts] { return run_generate(*opts); }; });
}

}  // namespace specserve::cli
