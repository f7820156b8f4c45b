#include "server/completion_output.h"

namespace specserve::server {

using nlohmann::json;

CompletionOutput::CompletionOutput(OutputOptions options, std::string echo_text)
    : opt_(std::move(options)), echo_(std::move(echo_text)) {
  text_offset_ = echo_.size();
}

json CompletionOutput::chunk(const std::string& text, const json& logprobs, const json& finish) const {
  json c = {
      {"id", opt_.id},
      {"object", "text_completion"},
      {"created", opt_.created},
      {"model", opt_.model},
      {"system_fingerprint", nullptr},
      {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
  if (opt_.include_usage) c["usage"] = nullptr;
  return c;
}

// Legacy completions logprobs: parallel arrays, top alternatives as {token: logprob} maps.
json CompletionOutput::logprobs_for(const std::vector<engine::TokenLogprob>& lps) {
  json tokens = json::array(), values = json::array(), top = json::array(), offsets = json::array();
  for (const auto& lp : lps) {
    std::string b = opt_.token_bytes(lp.token);
    tokens.push_back(b);
    values.push_back(lp.logprob);
    json t = json::object();
    for (int i = 0; i < opt_.top_logprobs && i < static_cast<int>(lp.top.size()); ++i) {
      t[opt_.token_bytes(lp.top[i].token)] = lp.top[i].logprob;
    }
    top.push_back(std::move(t));
    offsets.push_back(text_offset_);
    text_offset_ += b.size();
  }
  for (const auto& x : tokens) lp_tokens_.push_back(x);
  for (const auto& x : values) lp_values_.push_back(x);
  for (const auto& x : top) lp_top_.push_back(x);
  for (const auto& x : offsets) lp_offsets_.push_back(x);
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", top}, {"text_offset", offsets}};
}

void CompletionOutput::consume(const engine::StreamEvent& ev, std::vector<json>* chunks) {
  if (finished_) return;
  std::string text;
  if (!echo_sent_) {
    text = echo_;
    echo_sent_ = true;
  }
  text += ev.text;
  text_ += text;
  json lp = nullptr;
  if (opt_.logprobs && !ev.logprobs.empty()) lp = logprobs_for(ev.logprobs);
  if (ev.finished) {
    finished_ = true;
    usage_ = ev.usage;
    finish_reason_ = openai_finish_reason(ev.finish_reason);
    if (ev.finish_reason == engine::FinishReason::Error) error_ = ev.error.empty() ? "internal error" : ev.error;
  }
  if (!chunks) return;
  if (!text.empty() || !lp.is_null()) chunks->push_back(chunk(text, lp, nullptr));
  if (ev.finished) {
    chunks->push_back(chunk("", nullptr, finish_reason_));
    if (opt_.include_usage) {
      json u = chunk("", nullptr, nullptr);
      u["choices"] = json::array();
      u["usage"] = usage_json(usage_);
      chunks->push_back(std::move(u));
    }
  }
}

json CompletionOutput::response() const {
  json lp = nullptr;
  if (opt_.logprobs) {
    lp = {{"tokens", lp_tokens_},
          {"token_logprobs", lp_values_},
          {"top_logprobs", lp_top_},
          {"text_offset", lp_offsets_}};
  }
  return {
      {"id", opt_.id},
      {"object", "text_completion"},
      {"created", opt_.created},
      {"model", opt_.model},
      {"system_fingerprint", nullptr},
      {"choices", json::array({{{"index", 0}, {"text", text_}, {"logprobs", lp}, {"finish_reason", finish_reason_}}})},
      {"usage", usage_json(usage_)}};
}

}  // namespace specserve::server
