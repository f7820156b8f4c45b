#pragma once
// Turns engine output events of one /v1/completions request into `text_completion` objects:
// streamed chunks or one response. Text is passed through unchanged (no reasoning/tool parsing:
// the legacy endpoint returns exactly what the model wrote).
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/chat_output.h"

namespace specserve::server {

class CompletionOutput {
 public:
  // `echo_text` is prepended to the output (the request's echo: true), "" otherwise.
  CompletionOutput(OutputOptions options, std::string echo_text);

  void consume(const engine::StreamEvent& event, std::vector<nlohmann::json>* chunks);
  bool finished() const { return finished_; }
  const std::optional<std::string>& error() const { return error_; }
  nlohmann::json response() const;

 private:
  nlohmann::json chunk(const std::string& text, const nlohmann::json& logprobs, const nlohmann::json& finish) const;
  nlohmann::json logprobs_for(const std::vector<engine::TokenLogprob>& lps);

  OutputOptions opt_;
  std::string echo_;
  bool echo_sent_ = false;
  bool finished_ = false;
  std::string text_;
  nlohmann::json lp_tokens_ = nlohmann::json::array(), lp_values_ = nlohmann::json::array(),
                 lp_top_ = nlohmann::json::array(), lp_offsets_ = nlohmann::json::array();
  size_t text_offset_ = 0;
  std::string finish_reason_ = "stop";
  engine::Usage usage_;
  std::optional<std::string> error_;
};

}  // namespace specserve::server
