#pragma once
// A model served over HTTP: target weights, tokenizer, chat template, generation defaults and
// the engine that runs them — the real implementation of the ModelServices seam.
#include <functional>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "model/target_model.h"
#include "sampling/sampling_params.h"
#include "server/model_services.h"
#include "spec/dflash_drafter.h"
#include "spec/dflash_proposer.h"
#include "tokenizer/tokenizer.h"

namespace specserve::server {

struct ServeSpec {
  std::string model_dir;
  std::string draft_dir;                                             // DFlash drafter ("" = plain decoding)
  spec::DraftSampling draft_sampling = spec::DraftSampling::Argmax;  // engine.verify_mode pairs with it
  MatmulOrder draft_matmul = MatmulOrder::Free;  // the drafter's matmul order (spec/dflash_drafter.h)
  std::string draft_vocab = "all";               // the ids the drafter scores (spec/draft_vocabulary.h)
  std::string served_model_name;                 // "" = the model directory's name
  int threads = 0;                               // CPU threads (0 = all cores)
  std::string backend = "auto";   // where the target and drafter run: "auto" (cuda when present), "cpu" or "cuda"
  std::string dtype = "auto";     // weight storage of target and drafter: "auto" (the checkpoint's), "f32", "bf16"
  std::string kv_dtype = "auto";  // KV cache element type: "auto" (f32 for f32 weights, else bf16), "bf16", "f32"
  std::string fp8_weights = "dequantise";  // an fp8 checkpoint's Linear weights: "dequantise" or "keep"
  int tensor_parallel = 0;                 // LoadOptions::tensor_parallel (0: unsharded)
  std::string nccl_library;                // LoadOptions::nccl_library (--nccl-library)
  // kv_blocks is derived here, and max_seqs when 0 (engine/memory_plan.h); swap_space_bytes is
  // --swap-space-gib.
  engine::EngineOptions engine;
  int64_t kv_cache_mib = 0;  // KV-cache budget; 0 = auto (engine/memory_plan.h)
  // The step cost model of the adaptive draft policy (engine.draft_policy), for the loaded target and
  // drafter and the engine's options (kv_blocks and max_seqs set): cli/step_cost_calibration.h.
  std::function<StepCosts(TargetModel&, const spec::DFlashDrafter&, const engine::EngineOptions&)> step_costs;
  int request_timeout_s = 0;  // 0 = none
  // Benchmarks only (`bench serve-load --acceptance`, cli/serve_controlled.h); `serve` never sets it. With
  // no draft_dir: makes the drafter beside the loaded target (a random one of the target's real drafter
  // shape), which then serves as a loaded one would.
  std::function<std::unique_ptr<spec::DFlashDrafter>(const TargetModel&)> make_drafter;
  // Benchmarks only (`bench serve-load --synthetic`); `serve` never sets it. Makes the target (random weights of a
  // real shape) instead of reading model_dir's weights; model_dir then only holds the tokenizer (tokenizer.json,
  // and the chat template and generation_config.json where present), and the shape's config stands for config.json.
  std::function<std::unique_ptr<TargetModel>(const LoadOptions&)> make_target;
};

class LoadedModel : public ModelServices {
 public:
  using Progress = std::function<void(double fraction, const std::string& what)>;
  static std::shared_ptr<LoadedModel> load(const ServeSpec& spec, const Progress& progress);
  ~LoadedModel() override;

  const ModelInfo& info() const override { return info_; }
  ChatPrompt render_chat(const ChatRequest& request) const override;
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
  std::string token_bytes(int32_t token) const override;
  std::shared_ptr<engine::ResultStream> submit(const CommonRequest& request, std::vector<int32_t> prompt) override;
  engine::EngineMetrics& metrics() override { return engine_->metrics(); }

  engine::Engine& engine() { return *engine_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  // The loaded drafter's proposer; null without a drafter.
  engine::DraftProposer* proposer() const { return proposer_.get(); }

  // Benchmarks only (cli/serve_controlled.h; `serve` never calls it): replaces the engine with a fresh one of
  // the same options over the same target (an empty prefix cache), driving `proposer`: null for plain
  // decoding, or one that wraps proposer(); it must outlive the engine (restart again before it goes). Call
  // only while no request is in flight and nothing reads metrics().
  void restart_engine(engine::DraftProposer* proposer);

 private:
  LoadedModel() = default;

  ModelInfo info_;
  ServeSpec spec_;
  // Declaration order is destruction order reversed: the engine goes first, then the proposer and
  // drafter it uses, then the target both of them read.
  std::unique_ptr<TargetModel> target_;
  std::unique_ptr<spec::DFlashDrafter> drafter_;
  std::unique_ptr<spec::DFlashProposer> proposer_;
  tokenizer::Tokenizer tokenizer_;
  std::unique_ptr<chat::ChatTemplate> chat_template_;  // null when the checkpoint has none
  sampling::RequestParams defaults_;                   // generation_config.json + EOS ids
  std::unique_ptr<engine::Engine> engine_;

  engine::TokenText token_text() const;
};

}  // namespace specserve::server
