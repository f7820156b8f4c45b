#pragma once
// A tiny real checkpoint (tools/make_tiny_model) loaded as TargetModel + Tokenizer, an engine
// runner that collects each request's tokens, and a reference single-sequence decoder that uses
// the model directly (prefill the whole prompt, then one decode row per token) — what "the same
// request alone" means, independent of the engine.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "stream_drain.h"
#include "model/target_model.h"
#include "sampling/sampler.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"

namespace specserve::test {

struct TinyModel {
  std::filesystem::path dir;
  std::unique_ptr<TargetModel> model;
  tokenizer::Tokenizer tokenizer;

  explicit TinyModel(const std::string& family, uint64_t seed = 3) {
    dir = std::filesystem::temp_directory_path() /
          ("specserve-engine-" + family + "-" + std::to_string(seed) + "-" + std::to_string(::getpid()));
    tiny::write_tiny_model({dir.string(), seed, family, DType::BF16});
    model = TargetModel::load(dir.string(), {});
    tokenizer = tokenizer::Tokenizer::load(dir);
  }
  ~TinyModel() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  engine::TokenText token_text() const {
    const tokenizer::Tokenizer* t = &tokenizer;
    return [t](int32_t id) { return t->is_special(id) ? std::string() : std::string(t->token_bytes(id)); };
  }
  sampling::VocabBounds vocab() const { return {model->vocab_size(), tokenizer.id_limit()}; }
};

struct Output {
  std::vector<int32_t> tokens;
  std::string text;
  engine::FinishReason reason = engine::FinishReason::Error;
  engine::Usage usage;
};

inline Output collect(engine::ResultStream& s) {
  Output out;
  drain(s, [&](const engine::StreamEvent& e) {
    out.tokens.insert(out.tokens.end(), e.tokens.begin(), e.tokens.end());
    out.text += e.text;
    if (e.finished) {
      out.reason = e.finish_reason;
      out.usage = e.usage;
    }
  });
  return out;
}

inline engine::GenerationRequest make_request(std::vector<int32_t> prompt, int64_t max_tokens, float temperature = 0,
                                              uint64_t seed = 0) {
  engine::GenerationRequest r;
  r.prompt = std::move(prompt);
  r.params.stop.max_tokens = max_tokens;
  r.params.stop.ignore_eos = true;
  r.params.sampling.temperature = temperature;
  if (temperature > 0) {
    r.params.sampling.top_p = 0.9f;
    r.params.sampling.seed = seed;
  }
  return r;
}

// Plain decoding of one request with the model alone: whole-prompt prefill, then decode rows.
inline std::vector<int32_t> reference_decode(TinyModel& m, const engine::GenerationRequest& req) {
  sampling::Sampler sampler(req.params, m.vocab());
  sampling::SamplerState history = sampler.make_state(req.prompt);
  auto seq = m.model->new_sequence();
  ForwardBatch b;
  b.spans = {{seq.get(), req.prompt, SpanMode::Prefill, LogitsWanted::Last}};
  ForwardResult r = m.model->forward(b);
  std::vector<int32_t> out;
  const int64_t vocab = r.logits.shape()[1];
  for (;;) {
    int32_t t = sampler.pick(std::span<const float>(r.logits.as<float>(), vocab), history).token;
    history.push(t);
    out.push_back(t);
    if (static_cast<int64_t>(out.size()) == *req.params.stop.max_tokens) return out;
    std::vector<int32_t> in = {t};
    b.spans = {{seq.get(), in, SpanMode::Extend, LogitsWanted::Last}};
    r = m.model->forward(b);
    m.model->commit(*seq, 1);
  }
}

// Waits until the engine holds no sequence (finished ones are retired at the end of a step).
inline bool wait_for_idle(engine::Engine& e) {
  for (int i = 0; i < 2000; ++i) {
    if (e.metrics().requests_running.load() == 0 && e.metrics().requests_waiting.load() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Deterministic prompt of `n` token ids drawn from the tokenizer's range.
inline std::vector<int32_t> prompt_of(int n, int salt, int32_t limit) {
  std::vector<int32_t> p;
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(salt + 1);
  for (int i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p.push_back(static_cast<int32_t>(x % static_cast<uint64_t>(limit - 16)));
  }
  return p;
}

}  // namespace specserve::test
