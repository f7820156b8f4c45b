#pragma once
// The model an acceptance-controlled serving benchmark serves (cli/serve_controlled.h): a ModelServices that
// forwards everything to a LoadedModel and records, for every request, the prompt ids the HTTP layer
// submitted and the token ids the engine streamed back. The plain pass's records are the controlled
// proposer's recording; the speculative passes' are checked against them. The engine's stream is teed: its
// events go on unchanged to the stream the HTTP layer reads (a cancel there cancels the engine's).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/controlled_draft_proposer.h"
#include "server/loaded_model.h"

namespace specserve::cli {

// One finished request: its prompt and output ids, and the engine's error when it failed.
struct ServedRequest {
  RecordedRequest tokens;
  std::string error;
};

class RecordingServices final : public server::ModelServices {
 public:
  explicit RecordingServices(std::shared_ptr<server::LoadedModel> model) : model_(std::move(model)) {}

  const server::ModelInfo& info() const override { return model_->info(); }
  server::ChatPrompt render_chat(const server::ChatRequest& request) const override {
    return model_->render_chat(request);
  }
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override {
    return model_->encode(text, add_special_tokens);
  }
  std::string decode(const std::vector<int32_t>& tokens) const override { return model_->decode(tokens); }
  std::string token_bytes(int32_t token) const override { return model_->token_bytes(token); }
  std::shared_ptr<engine::ResultStream> submit(const server::CommonRequest& request,
                                               std::vector<int32_t> prompt_tokens) override;
  engine::EngineMetrics& metrics() override { return model_->metrics(); }

  // The requests that finished since the last call, in the order they finished.
  std::vector<ServedRequest> take();

 private:
  void finished(ServedRequest request);

  std::shared_ptr<server::LoadedModel> model_;
  std::mutex mutex_;
  std::vector<ServedRequest> finished_;
};

}  // namespace specserve::cli
