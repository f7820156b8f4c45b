#pragma once
// The seam between the HTTP layer and a loaded model: everything a handler needs once loading is
// done (chat template, tokenizer, engine submission, metrics). The HTTP layer never touches model
// weights; it renders, tokenizes, validates and enqueues. `LoadedModel` (loaded_model.h)
// implements it over the real tokenizer, chat template and engine.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/metrics.h"
#include "engine/result_stream.h"
#include "server/reasoning_splitter.h"

namespace specserve::server {

struct CommonRequest;
struct ChatRequest;

struct ModelInfo {
  std::string id;  // served model name
  int64_t created = 0;
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // prompt + completion tokens
  std::string owned_by = "specserve";
  std::string root;          // model directory
  bool speculative = false;  // a DFlash drafter proposes drafts
  int gamma = 0;             // drafts per verify
};

// Rendered chat prompt.
struct ChatPrompt {
  std::string text;
  ReasoningStart reasoning = ReasoningStart::Detect;  // where the output starts (reasoning_splitter.h)
};

class ModelServices {
 public:
  virtual ~ModelServices() = default;
  virtual const ModelInfo& info() const = 0;

  // Text side (runs on HTTP threads; thread-safe, no model work).
  virtual ChatPrompt render_chat(const ChatRequest& request) const = 0;
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const = 0;
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
  virtual std::string token_bytes(int32_t token) const = 0;

  // Enqueues a generation; the engine owns it from here. Throws ApiError (400 for sampling
  // parameters the sampling layer rejects, 503 when the queue is full).
  virtual std::shared_ptr<engine::ResultStream> submit(const CommonRequest& request,
                                                       std::vector<int32_t> prompt_tokens) = 0;
  virtual engine::EngineMetrics& metrics() = 0;
};

}  // namespace specserve::server
