#include "server/chat_output.h"

namespace specserve::server {

using nlohmann::json;

const char* openai_finish_reason(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::Length: return "length";
    case engine::FinishReason::ToolCalls: return "tool_calls";
    case engine::FinishReason::Cancelled: return "abort";
    case engine::FinishReason::Error: return "error";
    case engine::FinishReason::Stop: return "stop";
  }
  return "stop";
}

namespace {
json byte_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}
}  // namespace

json chat_logprobs_content(const std::vector<engine::TokenLogprob>& lps, int top_n,
                           const std::function<std::string(int32_t)>& token_bytes) {
  json content = json::array();
  for (const auto& lp : lps) {
    std::string b = token_bytes(lp.token);
    json top = json::array();
    for (int i = 0; i < top_n && i < static_cast<int>(lp.top.size()); ++i) {
      std::string tb = token_bytes(lp.top[i].token);
      top.push_back({{"token", tb}, {"logprob", lp.top[i].logprob}, {"bytes", byte_array(tb)}});
    }
    content.push_back(
        {{"token", b}, {"logprob", lp.logprob}, {"bytes", byte_array(b)}, {"top_logprobs", std::move(top)}});
  }
  return content;
}

json usage_json(const engine::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

ChatOutput::ChatOutput(OutputOptions options) : opt_(std::move(options)), splitter_(opt_.reasoning) {
  if (opt_.tools) tools_.emplace(opt_.tools);
}

json ChatOutput::chunk(json delta, const json& finish_reason) const {
  json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  json c = {{"id", opt_.id},       {"object", "chat.completion.chunk"}, {"created", opt_.created},
            {"model", opt_.model}, {"system_fingerprint", nullptr},     {"choices", json::array({std::move(choice)})}};
  // With include_usage every chunk carries "usage": null; the last one carries the totals.
  if (opt_.include_usage) c["usage"] = nullptr;
  return c;
}

void ChatOutput::emit_text(const SplitText& split, std::vector<json>* chunks, json logprobs) {
  std::string content = split.content;
  if (tools_ && !content.empty()) content = tools_->feed(content);
  reasoning_ += split.reasoning;
  content_ += content;
  if (!chunks) return;
  bool has_lp = logprobs.is_array() && !logprobs.empty();
  if (split.reasoning.empty() && content.empty() && !has_lp) return;
  json delta = json::object();
  if (!split.reasoning.empty()) delta["reasoning_content"] = split.reasoning;
  if (!content.empty()) delta["content"] = content;
  json c = chunk(std::move(delta), nullptr);
  if (has_lp) c["choices"][0]["logprobs"] = {{"content", std::move(logprobs)}};
  chunks->push_back(std::move(c));
}

void ChatOutput::consume(const engine::StreamEvent& ev, std::vector<json>* chunks) {
  if (finished_) return;
  if (chunks && !sent_role_) {
    chunks->push_back(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
    sent_role_ = true;
  }
  json lp = nullptr;
  if (opt_.logprobs && !ev.logprobs.empty()) {
    lp = chat_logprobs_content(ev.logprobs, opt_.top_logprobs, opt_.token_bytes);
    for (const auto& e : lp) logprobs_.push_back(e);
  }
  emit_text(splitter_.feed(ev.text), chunks, std::move(lp));
  if (!ev.finished) return;

  finished_ = true;
  usage_ = ev.usage;
  emit_text(splitter_.finish(), chunks, nullptr);
  if (ev.finish_reason == engine::FinishReason::Error) error_ = ev.error.empty() ? "internal error" : ev.error;
  finish_reason_ = openai_finish_reason(ev.finish_reason);
  if (tools_) {
    ToolCallParse parsed = tools_->finish();
    content_ += parsed.content;
    if (chunks && !parsed.content.empty()) chunks->push_back(chunk({{"content", parsed.content}}, nullptr));
    for (size_t i = 0; i < parsed.calls.size(); ++i) {
      const ToolCall& call = parsed.calls[i];
      if (chunks) {
        json tc = {{"index", static_cast<int>(calls_.size())},
                   {"id", call.id},
                   {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
        chunks->push_back(chunk({{"tool_calls", json::array({std::move(tc)})}}, nullptr));
      }
      calls_.push_back(call);
    }
    if (!calls_.empty() && ev.finish_reason == engine::FinishReason::Stop) finish_reason_ = "tool_calls";
  }
  if (chunks) {
    chunks->push_back(chunk(json::object(), finish_reason_));
    if (opt_.include_usage) {
      json u = chunk(json::object(), nullptr);
      u["choices"] = json::array();
      u["usage"] = usage_json(usage_);
      chunks->push_back(std::move(u));
    }
  }
}

json ChatOutput::response() const {
  json message = {{"role", "assistant"}, {"content", content_}};
  if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
  if (!calls_.empty()) {
    json tcs = json::array();
    for (const auto& c : calls_) {
      tcs.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(tcs);
    if (content_.empty()) message["content"] = nullptr;
  }
  json choice = {
      {"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr}, {"finish_reason", finish_reason_}};
  if (opt_.logprobs) choice["logprobs"] = {{"content", logprobs_}};
  return {{"id", opt_.id},
          {"object", "chat.completion"},
          {"created", opt_.created},
          {"model", opt_.model},
          {"system_fingerprint", nullptr},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json(usage_)}};
}

}  // namespace specserve::server
