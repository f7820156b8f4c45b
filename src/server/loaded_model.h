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
  engine::EngineOptions engine;   // kv_blocks is derived from kv_cache_mib here
  int64_t kv_cache_mib = 0;       // KV-cache budget; 0 = auto (see kv_budget_blocks)
  int request_timeout_s = 0;      // 0 = none
};

// The KV budget in blocks for `spec`: kv_cache_mib when given, else enough for max_seqs full-
// context sequences but at most a quarter of physical memory.
// What one KV block and one sequence cost, and the memory they come from.
struct KvSizing {
  size_t block_bytes = 0;     // target + drafter KV per 16 positions
  size_t sequence_bytes = 0;  // DeltaNet state per sequence
  bool on_device = false;
  size_t available_bytes = 0;  // device: free after the weights; host: physical RAM
};
// The KV budget in blocks: --kv-cache-mib when given; else enough for max_seqs full contexts, capped
// at a quarter of the RAM on the host, and on a device at what is free after the weights, the
// DeltaNet state of max_seqs sequences and a headroom for activations (1 GiB + 5 %).
int64_t kv_budget_blocks(const ModelConfig& config, const ServeSpec& spec, const KvSizing& sizing);

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
};

}  // namespace specserve::server
