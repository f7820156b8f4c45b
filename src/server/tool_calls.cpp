#include "server/tool_calls.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

namespace specserve::server {

namespace {
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

std::string_view trim(std::string_view s) {
  auto sp = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && sp(s.front())) s.remove_prefix(1);
  while (!s.empty() && sp(s.back())) s.remove_suffix(1);
  return s;
}

std::string new_call_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  uint64_t x = salt ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return fmt::format("call_{:016x}", x);
}

// The JSON-schema type of parameter `param` of function `fn` in the request's tools, or "".
std::string schema_type(const nlohmann::json* tools, const std::string& fn, const std::string& param) {
  if (!tools || !tools->is_array()) return "";
  for (const auto& t : *tools) {
    if (!t.is_object()) continue;
    const auto f = t.find("function");
    if (f == t.end() || !f->is_object()) continue;
    auto n = f->find("name");
    if (n == f->end() || !n->is_string() || n->get<std::string>() != fn) continue;
    auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return "";
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return "";
    auto p = props->find(param);
    if (p == props->end() || !p->is_object()) return "";
    auto ty = p->find("type");
    if (ty != p->end() && ty->is_string()) return ty->get<std::string>();
    return "";
  }
  return "";
}

nlohmann::json typed_value(std::string_view text, const std::string& type) {
  if (type.empty() || type == "string") return std::string(text);
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::string(text);
  if ((type == "integer" && parsed.is_number_integer()) || (type == "number" && parsed.is_number()) ||
      (type == "boolean" && parsed.is_boolean()) || (type == "object" && parsed.is_object()) ||
      (type == "array" && parsed.is_array()) || type == "null") {
    return parsed;
  }
  return std::string(text);
}

// Strips exactly one leading and one trailing newline (the template puts values on their own line).
std::string_view strip_newlines(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

bool parse_xml_call(std::string_view body, const nlohmann::json* tools, ToolCall& call) {
  constexpr std::string_view kFn = "<function=";
  size_t f = body.find(kFn);
  if (f == std::string_view::npos) return false;
  size_t gt = body.find('>', f);
  if (gt == std::string_view::npos) return false;
  call.name = std::string(trim(body.substr(f + kFn.size(), gt - f - kFn.size())));
  if (call.name.empty()) return false;
  size_t end_fn = body.find("</function>", gt);
  std::string_view inner =
      body.substr(gt + 1, end_fn == std::string_view::npos ? std::string_view::npos : end_fn - gt - 1);
  nlohmann::json args = nlohmann::json::object();
  constexpr std::string_view kParam = "<parameter=";
  size_t pos = 0;
  while ((pos = inner.find(kParam, pos)) != std::string_view::npos) {
    size_t pgt = inner.find('>', pos);
    if (pgt == std::string_view::npos) return false;
    std::string pname(trim(inner.substr(pos + kParam.size(), pgt - pos - kParam.size())));
    size_t pend = inner.find("</parameter>", pgt);
    // A missing </parameter> ends the value at the next parameter or the end of the function.
    size_t next = inner.find(kParam, pgt);
    size_t vend = std::min(pend, next);
    if (vend == std::string_view::npos) vend = inner.size();
    std::string_view value = strip_newlines(inner.substr(pgt + 1, vend - pgt - 1));
    args[pname] = typed_value(value, schema_type(tools, call.name, pname));
    pos = (vend == pend && pend != std::string_view::npos) ? pend + 12 : vend;
  }
  call.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return true;
}

bool parse_json_call(std::string_view body, ToolCall& call) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto n = j.find("name");
  if (n == j.end() || !n->is_string()) return false;
  call.name = n->get<std::string>();
  auto a = j.find("arguments");
  if (a == j.end() || a->is_null()) {
    call.arguments = "{}";
  } else if (a->is_string()) {
    call.arguments = a->get<std::string>();
  } else {
    call.arguments = a->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return true;
}
}  // namespace

ToolCallParse parse_tool_calls(std::string_view text, const nlohmann::json* tools) {
  ToolCallParse out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find(kCallOpen, pos);
    if (open == std::string_view::npos) {
      out.content.append(text.substr(pos));
      break;
    }
    out.content.append(text.substr(pos, open - pos));
    size_t body_begin = open + kCallOpen.size();
    size_t close = text.find(kCallClose, body_begin);
    // An unclosed final block (the model hit max_tokens or stopped early) is still tried.
    std::string_view body =
        text.substr(body_begin, close == std::string_view::npos ? std::string_view::npos : close - body_begin);
    size_t next = close == std::string_view::npos ? text.size() : close + kCallClose.size();
    ToolCall call;
    std::string_view tb = trim(body);
    bool ok = !tb.empty() && (tb.front() == '{' ? parse_json_call(tb, call) : parse_xml_call(tb, tools, call));
    if (ok) {
      call.id = new_call_id();
      out.calls.push_back(std::move(call));
    } else {
      out.content.append(text.substr(open, next - open));
    }
    pos = next;
  }
  if (!out.calls.empty()) out.content = std::string(trim(out.content));
  return out;
}

std::string ToolCallStream::feed(std::string_view content) {
  pending_.append(content);
  if (holding_) return {};
  size_t open = pending_.find(kCallOpen);
  if (open != std::string::npos) {
    std::string release = pending_.substr(0, open);
    pending_.erase(0, open);
    holding_ = true;
    return release;
  }
  // Hold a tail that may be the beginning of "<tool_call>".
  size_t hold = 0;
  for (size_t n = std::min(pending_.size(), kCallOpen.size() - 1); n > 0; --n) {
    if (std::string_view(pending_).substr(pending_.size() - n) == kCallOpen.substr(0, n)) {
      hold = n;
      break;
    }
  }
  std::string release = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return release;
}

ToolCallParse ToolCallStream::finish() {
  ToolCallParse p = parse_tool_calls(pending_, tools_);
  pending_.clear();
  return p;
}

}  // namespace specserve::server
