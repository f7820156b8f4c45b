// `specserve generate`: plain (non-speculative) generation for one prompt on the CPU backend.
//
//   specserve generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3 | --prompt-file F) [--chat]
//       --max-tokens N [--temperature T] [--seed S] [--ignore-eos] [--json] [--threads N] [--dtype D]
//
// --json prints one object (a stable interface: external checks read it):
//   {"token_ids":[generated ids], "text":"...", "finish_reason":"length"|"stop",
//    "stats":{"prompt_tokens":n,"generated_tokens":n,"prefill_ms":x,"decode_ms":x,"tokens_per_s":x}}
// `text` is omitted when DIR has no tokenizer.json (then only --prompt-ids works). The temperature defaults to 0 (greedy, ties to
// the lowest id) whatever generation_config.json says, so a bare command is deterministic; the other
// sampling defaults come from generation_config.json. Sampling and stopping go through the sampling
// library (position-keyed randomness), exactly as the engine will.
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
#include "core/error.h"
#include "model/target_model.h"
#include "sampling/cli_flags.h"
#include "sampling/generation_config.h"
#include "sampling/sampler.h"
#include "sampling/stop_checker.h"
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
  bool chat = false;
  bool json = false;
  int threads = 0;
  sampling::SamplingFlags sampling;
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

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SS_CHECK(f.good(), "--prompt-file: cannot read '{}'", path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int run_generate(GenerateOptions& o) {
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

  auto model = TargetModel::load(o.model, LoadOptions{o.dtype, o.threads});
  sampling::RequestParams params = o.sampling.resolve(model_defaults(o.model, model->config()));
  SS_CHECK(params.stop.max_tokens.has_value() && *params.stop.max_tokens > 0, "--max-tokens must be given and > 0");
  SS_CHECK(params.stop.stop.empty() || tok.has_value(), "--stop strings need {}/tokenizer.json", o.model);
  for (int32_t id : prompt)
    SS_CHECK(id < model->vocab_size(), "--prompt-ids: {} is outside the vocabulary [0, {})", id, model->vocab_size());

  // Rows past the tokenizer's ids are padding (models.md §2.3): never picked.
  const int64_t real_vocab = tok ? std::min<int64_t>(tok->id_limit(), model->vocab_size()) : 0;
  const sampling::Sampler sampler(params, sampling::VocabBounds{model->vocab_size(), real_vocab});
  sampling::SamplerState history = sampler.make_state(prompt);
  sampling::StopChecker stop(sampler.stop_params());
  auto seq = model->new_sequence();

  // Prefill in fixed chunks; only the last chunk's last row needs logits.
  const auto t_prefill = std::chrono::steady_clock::now();
  ForwardResult r;
  for (size_t b = 0; b < prompt.size(); b += kPrefillChunk) {
    const size_t e = std::min(prompt.size(), b + kPrefillChunk);
    ForwardBatch batch;
    batch.spans.push_back({seq.get(), std::span(prompt).subspan(b, e - b), SpanMode::Prefill,
                           e == prompt.size() ? LogitsWanted::Last : LogitsWanted::None});
    r = model->forward(batch);
  }
  const double prefill_ms = ms_since(t_prefill);

  // Decode: pick, check stops, feed the token back as a 1-row extend and commit it.
  const auto t_decode = std::chrono::steady_clock::now();
  const int64_t V = model->vocab_size();
  std::vector<int32_t> output;
  std::vector<std::string> piece(1);
  for (;;) {
    const sampling::Pick pick = sampler.pick(std::span<const float>(r.logits.as<float>(), V), history);
    history.push(pick.token);
    piece[0] = tok ? std::string(tok->token_bytes(pick.token)) : std::string();
    const sampling::StopStep step = stop.consume(std::span(&pick.token, 1), piece);
    if (step.tokens_kept > 0) output.push_back(pick.token);
    if (step.finished()) break;
    const std::vector<int32_t> tok = {pick.token};
    ForwardBatch batch;
    batch.spans.push_back({seq.get(), tok, SpanMode::Extend, LogitsWanted::Last});
    r = model->forward(batch);
    model->commit(*seq, 1);
  }
  const double decode_ms = ms_since(t_decode);
  const double tps = decode_ms > 0 ? static_cast<double>(output.size()) * 1000.0 / decode_ms : 0.0;
  const std::string finish = sampling::finish_reason_name(stop.reason());

  if (o.json) {
    nlohmann::ordered_json j;
    j["token_ids"] = output;
    if (tok) j["text"] = stop.text();
    j["finish_reason"] = finish;
    j["stats"] = {{"prompt_tokens", prompt.size()},
                  {"generated_tokens", output.size()},
                  {"prefill_ms", prefill_ms},
                  {"decode_ms", decode_ms},
                  {"tokens_per_s", tps}};
    // Invalid UTF-8 (a multi-byte character cut by max_tokens) becomes U+FFFD, as in HF decode.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  } else if (tok) {
    std::printf("%s\n", stop.text().c_str());
  } else {
    std::string ids;
    for (int32_t t : output) ids += (ids.empty() ? "" : " ") + std::to_string(t);
    std::printf("%s\n", ids.c_str());
    std::fprintf(stderr, "[%s] prompt %zu tokens, generated %zu; prefill %.1f ms, decode %.1f ms (%.2f tokens/s)\n",
                 finish.c_str(), prompt.size(), output.size(), prefill_ms, decode_ms, tps);
  }
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of one prompt (no speculation)");
  cmd->add_option("--model", opts->model, "Model directory (config.json + safetensors)")->required();
  cmd->add_option("--prompt", opts->prompt, "Prompt text (needs a tokenizer)");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt token ids, comma-separated");
  cmd->add_option("--prompt-file", opts->prompt_file, "File holding the prompt text (needs a tokenizer)");
  cmd->add_flag("--chat", opts->chat, "Render the prompt as one user message with the model's chat template");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->add_option("--threads", opts->threads, "CPU threads (default: all cores)");
  cmd->add_option("--dtype", opts->dtype, "Weight storage: auto (checkpoint's), f32 or bf16");
  opts->sampling.add_to(*cmd);
  cmd->callback([&run, opts] { run = [opts] { return run_generate(*opts); }; });
}

}  // namespace specserve::cli
