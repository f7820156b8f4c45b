#include "server/loaded_model.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "backend/memory.h"
#include "backend/ops.h"
#include "core/log.h"
#include "engine/memory_plan.h"
#include "io/model_config.h"
#include "sampling/dry_breakers.h"
#include "sampling/generation_config.h"
#include "sampling/request_json.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/weights_prefetch.h"
#include "spec/drafter_sequence.h"

namespace specserve::server {

namespace fs = std::filesystem;

std::shared_ptr<LoadedModel> LoadedModel::load(const ServeSpec& spec, const Progress& progress) {
  std::shared_ptr<LoadedModel> m(new LoadedModel());
  m->spec_ = spec;
  progress(0.0, spec.make_target ? "the target's shape" : "reading config.json");
  ModelConfig config = spec.make_target ? ModelConfig{} : load_model_config(spec.model_dir);

  // Weights dominate load time; read them through the page cache with a byte count (0 → 85%).
  const double drafter_share = spec.draft_dir.empty() ? 0.0 : 0.1;
  auto read_progress = [&](double from, double span) {
    return [&progress, from, span](uint64_t done, uint64_t total) {
      if (total > 0) {
        progress(from + span * static_cast<double>(done) / static_cast<double>(total),
                 fmt::format("reading weights {:.0f}/{:.0f} MiB", done / 1048576.0, total / 1048576.0));
      }
    };
  };
  if (!spec.make_target) prefetch_weights(spec.model_dir, read_progress(0.0, 0.85 - drafter_share));
  if (!spec.draft_dir.empty()) prefetch_weights(spec.draft_dir, read_progress(0.85 - drafter_share, drafter_share));
  progress(0.85, "building the target model");
  LoadOptions load;
  load.threads = spec.threads;
  load.backend = spec.backend;
  load.dtype = spec.dtype;
  load.kv_dtype = spec.kv_dtype;
  load.fp8_weights = spec.fp8_weights;
  load.tensor_parallel = spec.tensor_parallel;
  load.nccl_library = spec.nccl_library;
  if (spec.make_target) {
    m->target_ = spec.make_target(load);
    config = m->target_->config();
  } else {
    m->target_ = TargetModel::load(spec.model_dir, load);
  }
  // Kept fp8 weights (--fp8-weights keep) stream fewer bytes than their dequantised form: say so, with both.
  const size_t step_bytes = m->target_->step_weight_bytes();
  const size_t dequantised_bytes = m->target_->dequantised_step_weight_bytes();
  const std::string kept =
      step_bytes < dequantised_bytes
          ? fmt::format(
                " (fp8 Linear weights kept, --fp8-weights keep: a step streams {:.2f} GB, {:.2f} GB dequantised)",
                step_bytes / 1e9, dequantised_bytes / 1e9)
          : std::string();
  SS_LOG_INFO("serve", "weights {}{}, KV cache {} (--kv-dtype {}): {} bytes per 16 positions",
              dtype_name(m->target_->weight_dtype()), kept, dtype_name(m->target_->kv_dtype()), spec.kv_dtype,
              m->target_->kv_block_bytes());
  // Before the drafter: a --draft-vocab subset always keeps the tokenizer's added tokens.
  progress(0.88, "loading the tokenizer");
  m->tokenizer_ = tokenizer::Tokenizer::load(spec.model_dir);
  if (!spec.draft_dir.empty() || spec.make_drafter) {
    progress(0.9, "building the DFlash drafter");
    // Checks the pairing (hidden size, vocabulary, target layer ids) against the loaded target.
    m->drafter_ = spec.draft_dir.empty() ? spec.make_drafter(*m->target_)
                                         : spec::DFlashDrafter::load(spec.draft_dir, *m->target_, spec.dtype);
    m->drafter_->set_matmul_order(spec.draft_matmul);
    // Before the KV budget: the compact head takes device memory too.
    if (m->drafter_->select_vocabulary(spec.draft_vocab, &m->tokenizer_)) {
      SS_LOG_INFO("serve", "the drafter scores {} of {} ids (--draft-vocab {})", m->drafter_->head_rows(),
                  m->target_->vocab_size(), spec.draft_vocab);
    }
  }
  // The memory budget from what is left after the weights, target and drafter counted together
  // (engine/memory_plan.h), reserved now (pools sized at start-up).
  if (m->drafter_) {
    m->proposer_ = std::make_unique<spec::DFlashProposer>(
        *m->drafter_, spec::proposer_options(spec.engine.gamma, spec.draft_sampling, spec.engine.verify_mode));
  }
  const Memory& mem = m->target_->forward_memory();
  engine::MemoryCosts costs;
  costs.block_bytes = m->target_->kv_block_bytes() + (m->drafter_ ? m->drafter_->kv_block_bytes() : 0);
  costs.sequence_bytes = m->target_->sequence_state_bytes();
  if (m->proposer_) {
    // The drafter context's waiting rows (fewer than max_waiting_rows between steps, in pages of
    // kWaitingPageRows: up to a page's room beyond them) and its block scratch beyond the target's (one
    // block).
    const int64_t waiting_capacity =
        spec::DFlashProposerOptions{}.max_waiting_rows + spec::DrafterSequence::kWaitingPageRows - 1;
    costs.sequence_bytes +=
        static_cast<size_t>(waiting_capacity) * static_cast<size_t>(m->drafter_->feature_width()) * 4 +
        m->drafter_->kv_block_bytes();
  }
  // One forward row's activations: its logits, captured features and a few hidden-size rows.
  costs.row_bytes = static_cast<size_t>(m->target_->vocab_size() + 8 * m->target_->hidden_size() +
                                        (m->drafter_ ? m->drafter_->feature_width() : 0)) *
                    4;
  costs.rows_per_sequence = m->proposer_ ? m->proposer_->gamma() + 1 : 1;
  costs.on_device = mem.device() != Device::CPU;
  costs.available_bytes = mem.available_bytes();
  costs.context_positions = config.max_position_embeddings;
  const engine::MemoryPlan plan = engine::plan_memory(costs, spec.engine.max_seqs, spec.kv_cache_mib);
  const int64_t kv_blocks = plan.kv_blocks;
  const int max_seqs = plan.max_seqs;
  SS_LOG_INFO("serve", "memory plan: {}; swap space {:.2f} GiB (--swap-space-gib)", plan.rule,
              gib(spec.engine.swap_space_bytes));
  if (costs.on_device) {
    progress(0.91, fmt::format("reserving {} KV blocks ({:.2f} GiB) and the state of {} sequences on the device",
                               kv_blocks, gib(static_cast<size_t>(kv_blocks) * costs.block_bytes), max_seqs));
    m->target_->reserve(kv_blocks, max_seqs);
    // A drafter sequence may hold one block past its budget share (its drafted block's scratch).
    if (m->drafter_) m->drafter_->reserve_kv_blocks(kv_blocks + max_seqs);
  }

  // Ids a request may name or the sampler may pick: the tokenizer's, within the lm_head's rows
  // (checkpoints pad the head above the tokenizer; a tokenizer larger than the head has ids the
  // model cannot produce).
  const int64_t vocab = std::min<int64_t>(m->tokenizer_.id_limit(), m->target_->vocab_size());
  if (m->tokenizer_.id_limit() > m->target_->vocab_size()) {
    SS_LOG_WARN("serve", "the tokenizer has {} ids but the model only {}; ids from {} on are refused",
                m->tokenizer_.id_limit(), m->target_->vocab_size(), m->target_->vocab_size());
  }
  try {
    m->chat_template_ = std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::load(spec.model_dir));
  } catch (const Error& e) {
    SS_LOG_WARN("serve", "no chat template ({}); /v1/chat/completions will answer 400", e.what());
  }

  // Generation defaults: the model's EOS ids and generation_config.json sampling values (a made target's
  // model_dir holds another model's tokenizer, whose generation_config.json is not this model's).
  m->defaults_.stop.eos_token_ids.assign(config.eos_token_ids.begin(), config.eos_token_ids.end());
  const fs::path gen = fs::path(spec.model_dir) / "generation_config.json";
  if (!spec.make_target && fs::exists(gen)) {
    std::ifstream in(gen);
    auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      sampling::apply_generation_config(j, m->defaults_);
      if (j.contains("eos_token_id")) {
        for (auto id : sampling::parse_eos_token_ids(j["eos_token_id"])) {
          auto& eos = m->defaults_.stop.eos_token_ids;
          if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
        }
      }
    }
  }
  // An EOS id the model cannot produce stops nothing; kept, it would make every request's stop list invalid.
  std::erase_if(m->defaults_.stop.eos_token_ids, [&](sampling::TokenId id) {
    const bool outside = id < 0 || id >= vocab;
    if (outside)
      SS_LOG_WARN("serve", "EOS id {} is outside the served vocabulary ({} ids): not a stop token", id, vocab);
    return outside;
  });
  if (m->defaults_.sampling.dry.sequence_breakers.empty()) {
    m->defaults_.sampling.dry.sequence_breakers = sampling::dry_breaker_sequences(
        m->defaults_.sampling.dry.sequence_breaker_strings, static_cast<sampling::TokenId>(vocab),
        [tok = &m->tokenizer_](sampling::TokenId id) { return std::string(tok->token_bytes(id)); },
        [tok = &m->tokenizer_](std::string_view s) { return tok->encode(s); });
  }

  progress(0.97, "starting the engine");
  engine::EngineOptions eo = spec.engine;
  eo.kv_blocks = kv_blocks;
  eo.max_seqs = max_seqs;
  eo.real_vocab = vocab;
  {
    // A step must hold every running sequence's decode / verify rows and one whole prefill chunk; with
    // hundreds of sequences the row budget grows rather than the chunk shrinking (normalised() would
    // shrink it to 64, far from the size the prefill kernels are tuned for). Their activations are in
    // the memory plan (row_bytes per sequence).
    const int64_t rows = int64_t{max_seqs} * costs.rows_per_sequence + eo.prefill_chunk / 64 * 64;
    if (eo.max_batch_rows < rows) {
      SS_LOG_INFO("serve", "--max-batch-rows {} -> {}: {} sequences x {} rows and a {}-row prefill chunk",
                  eo.max_batch_rows, rows, max_seqs, costs.rows_per_sequence, eo.prefill_chunk / 64 * 64);
      eo.max_batch_rows = static_cast<int>(rows);
    }
  }
  if (eo.draft_policy == engine::DraftPolicy::Adaptive) {
    SS_CHECK(m->drafter_ && spec.step_costs, "the adaptive draft policy needs a drafter and a step cost model");
    progress(0.98, "timing steps for the draft-length policy");
    eo.step_costs = spec.step_costs(*m->target_, *m->drafter_, eo);
  }
  m->engine_ = std::make_unique<engine::Engine>(*m->target_, eo, m->token_text(), m->proposer_.get());
  m->info_.speculative = m->proposer_ != nullptr;
  m->info_.gamma = m->proposer_ ? m->proposer_->gamma() : 0;

  m->info_.id = !spec.served_model_name.empty() ? spec.served_model_name
                                                : fs::path(spec.model_dir).lexically_normal().filename().string();
  if (m->info_.id.empty()) m->info_.id = fs::path(spec.model_dir).parent_path().filename().string();
  m->info_.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  m->info_.vocab_size = vocab;
  m->info_.context_length = m->engine_->max_sequence_tokens();
  m->info_.root = spec.model_dir;
  progress(1.0, "ready");
  return m;
}

engine::TokenText LoadedModel::token_text() const {
  // Special tokens (<|im_end|>, <|endoftext|>) add no text, as HF decode(skip_special_tokens).
  const tokenizer::Tokenizer* tok = &tokenizer_;
  return [tok](int32_t id) { return tok->is_special(id) ? std::string() : std::string(tok->token_bytes(id)); };
}

void LoadedModel::restart_engine(engine::DraftProposer* proposer) {
  const engine::EngineOptions eo = engine_->options();
  engine_.reset();  // its sequences and their drafter contexts go before the next engine starts
  engine_ = std::make_unique<engine::Engine>(*target_, eo, token_text(), proposer);
}

LoadedModel::~LoadedModel() {
  if (engine_) engine_->shutdown(std::chrono::milliseconds(0));
}

ChatPrompt LoadedModel::render_chat(const ChatRequest& request) const {
  if (!chat_template_) throw ApiError(400, "this model has no chat template; use /v1/completions");
  nlohmann::json r = {{"messages", request.messages},
                      {"add_generation_prompt", true},
                      {"chat_template_kwargs", request.chat_template_kwargs}};
  if (request.tools.is_array()) r["tools"] = request.tools;
  ChatPrompt p;
  p.text = chat_template_->render(r);
  p.reasoning = reasoning_start_of(p.text);
  return p;
}

std::vector<int32_t> LoadedModel::encode(const std::string& text, bool) const {
  // Qwen tokenizers add no BOS/EOS, so add_special_tokens changes nothing here.
  return tokenizer_.encode(text);
}

std::string LoadedModel::decode(const std::vector<int32_t>& tokens) const { return tokenizer_.decode(tokens); }

std::string LoadedModel::token_bytes(int32_t token) const { return std::string(tokenizer_.token_bytes(token)); }

std::shared_ptr<engine::ResultStream> LoadedModel::submit(const CommonRequest& request, std::vector<int32_t> prompt) {
  SS_CHECK(request.body != nullptr, "internal: request without a body");
  engine::GenerationRequest g;
  g.prompt = std::move(prompt);
  g.params = sampling::parse_request_params(*request.body, defaults_);  // Error → 400 naming the field
  g.params.stop.max_tokens = request.max_tokens;
  auto& dry = g.params.sampling.dry;
  if (dry.enabled() && dry.sequence_breakers.empty()) {
    // The request named its own breakers: convert them with this tokenizer.
    dry.sequence_breakers = sampling::dry_breaker_sequences(
        dry.sequence_breaker_strings, static_cast<sampling::TokenId>(info_.vocab_size),
        [this](sampling::TokenId id) { return std::string(tokenizer_.token_bytes(id)); },
        [this](std::string_view s) { return tokenizer_.encode(s); });
  }
  if (spec_.request_timeout_s > 0) g.deadline = g.arrival + std::chrono::seconds(spec_.request_timeout_s);
  try {
    return engine_->submit(std::move(g));
  } catch (const engine::QueueFull& e) {
    throw ApiError(503, e.what(), "service_unavailable", "", "server_busy");
  }
}

}  // namespace specserve::server
