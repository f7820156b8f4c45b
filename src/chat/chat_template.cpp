#include "chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace specserve::chat {

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  SS_CHECK(in.good(), "cannot open {}", p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* const kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                         "pad_token", "cls_token", "mask_token"};

// A special token is a string or an AddedToken object {"content": ...}; null means unset.
std::map<std::string, std::string> special_tokens_of(const nlohmann::json& config) {
  std::map<std::string, std::string> out;
  if (!config.is_object()) return out;
  for (const char* key : kSpecialTokenKeys) {
    if (!config.contains(key)) continue;
    const auto& v = config[key];
    if (v.is_string()) {
      out[key] = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      out[key] = v["content"].get<std::string>();
    }
  }
  return out;
}

constexpr const char* kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";

// Python truthiness of a JSON value (add_generation_prompt may arrive as any JSON value).
bool truthy_json(const nlohmann::ordered_json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_null()) return false;
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return false;
}

}  // namespace

ChatTemplate ChatTemplate::from_source(std::string source, std::map<std::string, std::string> special_tokens) {
  ChatTemplate t;
  t.default_ = jinja::Template::parse(source);
  t.default_source_ = std::move(source);
  t.special_tokens_ = std::move(special_tokens);
  return t;
}

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::json& config) {
  SS_CHECK(config.is_object() && config.contains("chat_template"), "tokenizer_config.json has no chat_template");
  const auto& ct = config["chat_template"];
  ChatTemplate t;
  if (ct.is_string()) {
    t = from_source(ct.get<std::string>(), special_tokens_of(config));
  } else if (ct.is_array()) {
    std::string dflt, tool_use;
    for (const auto& entry : ct) {
      SS_CHECK(
          entry.is_object() && entry.contains("name") && entry.contains("template") && entry["template"].is_string(),
          "tokenizer_config.json: chat_template list entries need a name and a template");
      const std::string name = entry["name"].get<std::string>();
      if (name == "default") dflt = entry["template"].get<std::string>();
      if (name == "tool_use") tool_use = entry["template"].get<std::string>();
    }
    SS_CHECK(!dflt.empty() || !tool_use.empty(), "tokenizer_config.json: no 'default' or 'tool_use' chat template");
    t = from_source(dflt.empty() ? tool_use : dflt, special_tokens_of(config));
    if (!tool_use.empty()) {
      t.tool_use_source_ = tool_use;
      t.tool_use_ = jinja::Template::parse(tool_use);
    }
  } else {
    fail("tokenizer_config.json: chat_template must be a string or a list of named templates");
  }
  return t;
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& dir) {
  return with_context("chat template in " + dir.string(), [&] {
    const auto config_path = dir / "tokenizer_config.json";
    nlohmann::json config = nlohmann::json::object();
    if (std::filesystem::exists(config_path)) {
      try {
        config = nlohmann::json::parse(read_file(config_path));
      } catch (const nlohmann::json::exception& e) {
        fail("{}: invalid JSON: {}", config_path.string(), e.what());
      }
    }
    const auto jinja_path = dir / "chat_template.jinja";
    if (std::filesystem::exists(jinja_path)) return from_source(read_file(jinja_path), special_tokens_of(config));
    SS_CHECK(config.contains("chat_template"), "no chat_template.jinja and no chat_template in tokenizer_config.json");
    return from_tokenizer_config(config);
  });
}

const std::string& ChatTemplate::source(bool with_tools) const {
  return (with_tools && !tool_use_source_.empty()) ? tool_use_source_ : default_source_;
}

std::string ChatTemplate::render_json(std::string_view request_json) const {
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(request_json);
  } catch (const nlohmann::json::exception& e) {
    fail("chat template request is not valid JSON: {}", e.what());
  }
  return render(request);
}

namespace {

// Request JSON deeper than this is refused before anything copies it recursively.
void check_depth(const nlohmann::ordered_json& root) {
  std::vector<std::pair<const nlohmann::ordered_json*, int>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto [j, d] = stack.back();
    stack.pop_back();
    SS_CHECK(d <= jinja::Value::kMaxJsonDepth, "chat template request is nested deeper than {} levels",
             jinja::Value::kMaxJsonDepth);
    if (j->is_structured()) {
      for (const auto& child : *j) stack.emplace_back(&child, d + 1);
    }
  }
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::ordered_json& request) const {
  using jinja::Value;
  SS_CHECK(request.is_object(), "chat template request must be a JSON object");
  check_depth(request);
  SS_CHECK(request.contains("messages") && request["messages"].is_array(),
           "chat template request needs a \"messages\" array");
  nlohmann::ordered_json messages = request["messages"];
  SS_CHECK(!messages.empty(), "Cannot apply chat template to an empty conversation. Provide at least one message.");
  for (const auto& m : messages) SS_CHECK(m.is_object(), "each message must be a JSON object");

  const bool has_tools = request.contains("tools") && !request["tools"].is_null();
  if (has_tools) {
    SS_CHECK(request["tools"].is_array(), "\"tools\" must be an array");
    for (const auto& t : request["tools"]) SS_CHECK(t.is_object(), "each tool must be a JSON object (a JSON schema)");
  }
  const bool add_generation_prompt =
      request.contains("add_generation_prompt") && truthy_json(request["add_generation_prompt"]);

  // continue_final_message: mark the end of the final message, render, cut after the mark.
  std::string continue_field;
  std::string final_text;
  if (request.contains("continue_final_message") && !request["continue_final_message"].is_null() &&
      !(request["continue_final_message"].is_boolean() && !request["continue_final_message"].get<bool>())) {
    const auto& c = request["continue_final_message"];
    continue_field = c.is_string() ? c.get<std::string>() : "content";
    SS_CHECK(!add_generation_prompt, "continue_final_message and add_generation_prompt are not compatible");
    auto& last = messages.back();
    SS_CHECK(last.contains(continue_field) && !last[continue_field].is_null(),
             "continue_final_message is set but the final message has no \"{}\" to continue", continue_field);
    auto& field = last[continue_field];
    if (field.is_string()) {
      final_text = field.get<std::string>();
      field = final_text + kContinueTag;
    } else if (field.is_array()) {
      bool found = false;
      for (auto it = field.rbegin(); it != field.rend(); ++it) {
        if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
          final_text = (*it)["text"].get<std::string>();
          (*it)["text"] = final_text + kContinueTag;
          found = true;
          break;
        }
      }
      SS_CHECK(found, "continue_final_message is set but we could not find any text to continue in the final message");
    } else {
      fail("continue_final_message: the final message's \"{}\" is not text", continue_field);
    }
  }

  jinja::Dict ctx;
  for (const auto& [k, v] : special_tokens_) ctx.set(Value::string(k), Value::string(v));
  auto add_kwargs = [&](const nlohmann::ordered_json& obj) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string& key = it.key();
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt" ||
          key == "continue_final_message" || key == "chat_template_kwargs") {
        continue;
      }
      ctx.set(Value::string(key), Value::from_json(it.value()));
    }
  };
  if (request.contains("chat_template_kwargs") && request["chat_template_kwargs"].is_object())
    add_kwargs(request["chat_template_kwargs"]);
  add_kwargs(request);
  ctx.set(Value::string("messages"), Value::from_json(messages));
  ctx.set(Value::string("tools"), has_tools ? Value::from_json(request["tools"]) : Value::none());
  ctx.set(Value::string("documents"), request.contains("documents") && !request["documents"].is_null()
                                          ? Value::from_json(request["documents"])
                                          : Value::none());
  ctx.set(Value::string("add_generation_prompt"), Value::boolean(add_generation_prompt));

  const jinja::Template& tmpl = (has_tools && !tool_use_source_.empty()) ? tool_use_ : default_;
  std::string out = tmpl.render(ctx);

  if (!continue_field.empty()) {
    const std::string tag = kContinueTag;
    const std::string tag_stripped = tag.substr(0, tag.size() - 1);
    auto strip = [](std::string s) {
      const char* ws = " \t\n\r\f\v";
      s.erase(0, s.find_first_not_of(ws));
      const size_t e = s.find_last_not_of(ws);
      s.erase(e == std::string::npos ? 0 : e + 1);
      return s;
    };
    SS_CHECK(out.find(strip(final_text)) != std::string::npos && out.find(tag_stripped) != std::string::npos,
             "continue_final_message is set but the final message does not appear in the rendered chat");
    const size_t at = out.rfind(tag_stripped);
    if (out.compare(at, tag.size(), tag) == 0) {
      out.resize(at);
    } else {
      out.resize(at);
      const size_t e = out.find_last_not_of(" \t\n\r\f\v");
      out.resize(e == std::string::npos ? 0 : e + 1);
    }
  }
  return out;
}

bool prompt_opens_reasoning(const std::string& prompt) {
  const size_t open = prompt.rfind("<think>");
  if (open == std::string::npos) return false;
  const size_t close = prompt.rfind("</think>");
  return close == std::string::npos || close < open;
}

}  // namespace specserve::chat
