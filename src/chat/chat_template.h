#pragma once
// Chat-template rendering as transformers' apply_chat_template does it: the checkpoint's own
// template (chat_template.jinja, else tokenizer_config.json "chat_template", incl. the named
// "default" / "tool_use" list form) rendered with messages, tools, documents,
// add_generation_prompt, the tokenizer's named special tokens (bos_token, eos_token, ...) and any
// extra template kwargs (enable_thinking, preserve_thinking, add_vision_id, ...).
//
// The server calls this per request: render() is const and thread-safe. Template errors
// (raise_exception in the template, undefined access, bad input) are specserve::Error with a
// one-line message, to be returned as HTTP 400.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "chat/jinja_template.h"

namespace specserve::chat {

class ChatTemplate {
 public:
  // From a tokenizer / model directory. Throws when it has no chat template.
  static ChatTemplate load(const std::filesystem::path& dir);
  // From template text (named special tokens are template variables, e.g. {"eos_token": "..."}).
  static ChatTemplate from_source(std::string source, std::map<std::string, std::string> special_tokens = {});
  // From a tokenizer_config.json object (its "chat_template" and special tokens).
  static ChatTemplate from_tokenizer_config(const nlohmann::json& config);

  // request: {"messages": [...], "tools"?: [...], "documents"?: [...], "add_generation_prompt"?: bool,
  //           "continue_final_message"?: bool, "chat_template_kwargs"?: {...}, other template kwargs...}
  // Parse requests with nlohmann::ordered_json (or pass the text to render_json): tojson writes
  // object keys in their original order, as Python dicts keep them.
  std::string render(const nlohmann::ordered_json& request) const;
  std::string render_json(std::string_view request_json) const;

  const std::string& source(bool with_tools = false) const;
  const std::map<std::string, std::string>& special_tokens() const { return special_tokens_; }

 private:
  std::string default_source_;
  std::string tool_use_source_;  // empty unless the config names a "tool_use" template
  jinja::Template default_;
  jinja::Template tool_use_;
  std::map<std::string, std::string> special_tokens_;
};

// True when the rendered prompt ends inside an open <think> block (Qwen3.5-style generation
// prompts), so the first generated tokens are reasoning.
bool prompt_opens_reasoning(const std::string& prompt);

}  // namespace specserve::chat
