#include "server/openai_request.h"

#include <charconv>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace specserve::server {

namespace {

using nlohmann::json;

// The sampling fields, range-checked here so a bad value is a 400 that names it.
void check_sampling_fields(const JsonFields& f, const RequestLimits& limits) {
  f.number("temperature", 0.0, 2.0);
  if (auto v = f.number("top_p", 0.0, 1.0)) {
    if (*v <= 0.0) throw_bad_param("top_p", "'top_p' must be greater than 0 and at most 1");
  }
  int64_t max_k = limits.vocab_size > 0 ? limits.vocab_size : INT32_MAX;
  f.integer("top_k", -1, max_k);
  f.number("min_p", 0.0, 1.0);
  f.number("presence_penalty", -2.0, 2.0);
  f.number("frequency_penalty", -2.0, 2.0);
  if (auto v = f.number("repetition_penalty", 0.0, 10.0)) {
    if (*v <= 0.0) throw_bad_param("repetition_penalty", "'repetition_penalty' must be greater than 0");
  }
  f.integer("seed", INT64_MIN, INT64_MAX);
  f.integer("min_tokens", 0, limits.max_tokens_limit);
  if (const json* bias = f.object("logit_bias")) {
    for (const auto& [key, value] : bias->items()) {
      int64_t id = -1;
      auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || ptr != key.data() + key.size() || key.empty()) {
        throw_bad_param("logit_bias", fmt::format("'logit_bias' keys must be token ids, got '{}'", key));
      }
      if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
        throw_bad_param("logit_bias",
                        fmt::format("'logit_bias' token id {} is out of range [0, {})", id, limits.vocab_size));
      }
      if (!value.is_number())
        throw_bad_param("logit_bias", fmt::format("'logit_bias' value for {} must be a number", key));
      double b = value.get<double>();
      if (!(b >= -100.0 && b <= 100.0)) {
        throw_bad_param("logit_bias", fmt::format("'logit_bias' value for {} must be between -100 and 100", key));
      }
    }
  }
}

void parse_stop(const JsonFields& f, const RequestLimits& limits, std::vector<std::string>& stop) {
  const json* v = f.any("stop");
  if (!v) return;
  auto add = [&](const json& s) {
    if (!s.is_string()) throw_bad_param("stop", "'stop' must be a string or an array of strings");
    std::string str = s.get<std::string>();
    if (str.empty()) throw_bad_param("stop", "'stop' strings must not be empty");
    if (static_cast<int>(str.size()) > limits.max_stop_string_bytes) {
      throw_bad_param("stop", fmt::format("'stop' strings must be at most {} bytes", limits.max_stop_string_bytes));
    }
    stop.push_back(std::move(str));
  };
  if (v->is_array()) {
    if (static_cast<int>(v->size()) > limits.max_stop_strings) {
      throw_bad_param("stop", fmt::format("'stop' may hold at most {} strings", limits.max_stop_strings));
    }
    for (const auto& s : *v) add(s);
  } else {
    add(*v);
  }
}

void parse_common(const json& body, const RequestLimits& limits, CommonRequest& r, bool chat) {
  JsonFields f(body);
  r.model = f.string("model").value_or("");
  r.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.object("stream_options")) {
    if (!r.stream) throw_bad_param("stream_options", "'stream_options' is only allowed when 'stream' is true");
    r.include_usage = JsonFields(*so, "stream_options.").boolean("include_usage").value_or(false);
  }
  // max_completion_tokens is the newer name; it wins when both are given.
  std::optional<int64_t> mt = f.integer("max_completion_tokens", 1, limits.max_tokens_limit);
  if (!mt) mt = f.integer("max_tokens", 1, limits.max_tokens_limit);
  r.max_tokens_given = mt.has_value();
  r.max_tokens = mt.value_or(limits.default_max_tokens);
  if (auto n = f.integer("n", 1, 128); n && *n != 1)
    throw_bad_param("n",
                    fmt::format("'n' = {} is not supported: this server returns one choice per request (n = 1); send "
                                "the request n times for more",
                                *n));
  if (auto b = f.integer("best_of", 1, 128); b && *b != 1)
    throw_bad_param("best_of", "only 'best_of' = 1 is supported");
  f.string("user");  // type-checked, otherwise unused
  r.ignore_eos = f.boolean("ignore_eos").value_or(false);
  parse_stop(f, limits, r.stop);
  check_sampling_fields(f, limits);
  r.body = &body;

  if (chat) {
    r.logprobs = f.boolean("logprobs").value_or(false);
    auto top = f.integer("top_logprobs", 0, limits.max_top_logprobs);
    if (top && *top > 0 && !r.logprobs)
      throw_bad_param("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    r.top_logprobs = static_cast<int>(top.value_or(0));
  } else {
    // Completions: logprobs is the number of alternatives (0 = only the sampled token).
    auto lp = f.integer("logprobs", 0, limits.max_top_logprobs);
    r.logprobs = lp.has_value();
    r.top_logprobs = static_cast<int>(lp.value_or(0));
  }
}

// Text of a message "content": a string, or an array of {"type":"text","text":...} parts.
json normalise_content(const json& content, const std::string& param, bool allow_null) {
  if (content.is_null()) {
    if (!allow_null) throw_bad_param(param, fmt::format("'{}' is required", param));
    return nullptr;
  }
  if (content.is_string()) return content;
  if (!content.is_array())
    throw_bad_param(param, fmt::format("'{}' must be a string or an array of content parts", param));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string pp = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) throw_bad_param(pp, fmt::format("'{}' must be an object", pp));
    JsonFields pf(part, pp + ".");
    auto type = pf.string("type");
    if (!type) throw_bad_param(pp + ".type", fmt::format("'{}.type' is required", pp));
    if (*type != "text") {
      throw_bad_param(pp + ".type", fmt::format("content part type '{}' is not supported (text only)", *type));
    }
    auto t = pf.string("text");
    if (!t) throw_bad_param(pp + ".text", fmt::format("'{}.text' is required", pp));
    text += *t;
  }
  return text;
}

json normalise_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) throw_bad_param(param, fmt::format("'{}' must be an array", param));
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string cp = fmt::format("{}[{}]", param, i);
    const json& c = calls[i];
    if (!c.is_object()) throw_bad_param(cp, fmt::format("'{}' must be an object", cp));
    JsonFields cf(c, cp + ".");
    auto type = cf.string("type");
    if (type && *type != "function") throw_bad_param(cp + ".type", "only tool calls of type 'function' are supported");
    const json* fn = cf.object("function");
    if (!fn) throw_bad_param(cp + ".function", fmt::format("'{}.function' is required", cp));
    JsonFields ff(*fn, cp + ".function.");
    auto name = ff.string("name");
    if (!name) throw_bad_param(cp + ".function.name", fmt::format("'{}.function.name' is required", cp));
    json args = json::object();
    if (const json* a = ff.any("arguments")) {
      // Templates (Qwen3.5's XML form) iterate the arguments as a mapping; clients send a JSON
      // string, so parse it here as vLLM does.
      if (a->is_string()) {
        auto parsed = json::parse(a->get<std::string>(), nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object()) {
          throw_bad_param(cp + ".function.arguments", fmt::format("'{}.function.arguments' must be a JSON object", cp));
        }
        args = std::move(parsed);
      } else if (a->is_object()) {
        args = *a;
      } else {
        throw_bad_param(cp + ".function.arguments", fmt::format("'{}.function.arguments' must be a string", cp));
      }
    }
    json call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", std::move(args)}}}};
    if (auto id = cf.string("id")) call["id"] = *id;
    out.push_back(std::move(call));
  }
  return out;
}

json normalise_messages(const json& messages, const RequestLimits& limits) {
  if (messages.empty()) throw_bad_param("messages", "'messages' must not be empty");
  if (static_cast<int>(messages.size()) > limits.max_messages) {
    throw_bad_param("messages", fmt::format("'messages' may hold at most {} messages", limits.max_messages));
  }
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string mp = fmt::format("messages[{}]", i);
    const json& m = messages[i];
    if (!m.is_object()) throw_bad_param(mp, fmt::format("'{}' must be an object", mp));
    JsonFields mf(m, mp + ".");
    auto role = mf.string("role");
    if (!role) throw_bad_param(mp + ".role", fmt::format("'{}.role' is required", mp));
    if (*role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      throw_bad_param(
          mp + ".role",
          fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got '{}'", mp, *role));
    }
    json msg = {{"role", *role}};
    const json* tool_calls = (*role == "assistant") ? mf.array("tool_calls") : nullptr;
    const json* content = mf.any("content");
    msg["content"] = normalise_content(content ? *content : json(nullptr), mp + ".content",
                                       /*allow_null=*/*role == "assistant");
    if (msg["content"].is_null()) msg["content"] = "";
    if (tool_calls) msg["tool_calls"] = normalise_tool_calls(*tool_calls, mp + ".tool_calls");
    if (auto name = mf.string("name")) msg["name"] = *name;
    if (*role == "tool") {
      if (auto id = mf.string("tool_call_id")) msg["tool_call_id"] = *id;
    }
    if (*role == "assistant") {
      if (auto rc = mf.string("reasoning_content")) msg["reasoning_content"] = *rc;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

json validate_tools(const json& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string tp = fmt::format("tools[{}]", i);
    const json& t = tools[i];
    if (!t.is_object()) throw_bad_param(tp, fmt::format("'{}' must be an object", tp));
    JsonFields tf(t, tp + ".");
    auto type = tf.string("type");
    if (type && *type != "function") throw_bad_param(tp + ".type", "only tools of type 'function' are supported");
    const json* fn = tf.object("function");
    if (!fn) throw_bad_param(tp + ".function", fmt::format("'{}.function' is required", tp));
    JsonFields ff(*fn, tp + ".function.");
    if (!ff.string("name")) throw_bad_param(tp + ".function.name", fmt::format("'{}.function.name' is required", tp));
    ff.string("description");
    ff.object("parameters");
  }
  return tools;
}

}  // namespace

ChatRequest parse_chat_request(const json& body, const RequestLimits& limits) {
  require_object(body, "the request body");
  ChatRequest r;
  parse_common(body, limits, r, /*chat=*/true);
  JsonFields f(body);
  const json* messages = f.array("messages");
  if (!messages) throw_bad_param("messages", "'messages' is required");
  r.messages = normalise_messages(*messages, limits);

  if (const json* tools = f.array("tools"); tools && !tools->empty()) r.tools = validate_tools(*tools);
  r.tools_enabled = r.tools.is_array();
  if (const json* choice = f.any("tool_choice")) {
    if (choice->is_string()) {
      std::string c = choice->get<std::string>();
      if (c == "none")
        r.tools_enabled = false;
      else if (c != "auto") {
        throw_bad_param("tool_choice", fmt::format("'tool_choice' '{}' is not supported (use 'auto' or 'none')", c));
      }
    } else if (choice->is_object()) {
      throw_bad_param("tool_choice", "forcing a named tool is not supported (use 'auto' or 'none')");
    } else {
      throw_bad_param("tool_choice", "'tool_choice' must be a string or an object");
    }
  }
  f.boolean("parallel_tool_calls");
  if (const json* rf = f.object("response_format")) {
    auto type = JsonFields(*rf, "response_format.").string("type");
    if (type && *type != "text") {
      throw_bad_param("response_format", fmt::format("'response_format' type '{}' is not supported", *type));
    }
  }
  if (const json* kw = f.object("chat_template_kwargs")) r.chat_template_kwargs = *kw;
  // Some clients send enable_thinking at the top level (Atlas / SGLang style).
  if (auto think = f.boolean("enable_thinking"); think && !r.chat_template_kwargs.contains("enable_thinking")) {
    r.chat_template_kwargs["enable_thinking"] = *think;
  }
  return r;
}

CompletionRequest parse_completion_request(const json& body, const RequestLimits& limits) {
  require_object(body, "the request body");
  CompletionRequest r;
  parse_common(body, limits, r, /*chat=*/false);
  JsonFields f(body);
  r.echo = f.boolean("echo").value_or(false);
  if (f.has("suffix")) throw_bad_param("suffix", "'suffix' is not supported");
  const json* prompt = f.any("prompt");
  if (!prompt) throw_bad_param("prompt", "'prompt' is required");
  const json* p = prompt;
  // A batch of one prompt (["text"] or [[1,2,3]]) is accepted; larger batches are not (n = 1).
  if (p->is_array() && p->size() == 1 && (p->at(0).is_string() || p->at(0).is_array())) p = &p->at(0);
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    if (r.prompt_text->empty()) throw_bad_param("prompt", "'prompt' must not be empty");
  } else if (p->is_array()) {
    if (p->empty()) throw_bad_param("prompt", "'prompt' must not be empty");
    for (const auto& t : *p) {
      if (t.is_string() || t.is_array()) throw_bad_param("prompt", "only one prompt per request is supported");
      if (!t.is_number_integer()) throw_bad_param("prompt", "'prompt' token ids must be integers");
      int64_t id = t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX ? -1 : t.get<int64_t>();
      if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
        throw_bad_param("prompt", fmt::format("'prompt' token id {} is out of range [0, {})", id, limits.vocab_size));
      }
      r.prompt_tokens.push_back(static_cast<int32_t>(id));
    }
  } else {
    throw_bad_param("prompt", "'prompt' must be a string or an array of token ids");
  }
  return r;
}

}  // namespace specserve::server
