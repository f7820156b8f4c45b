// libFuzzer target: the Jinja-subset renderer and chat-template requests. Any template text and any
// request JSON must end in output or a specserve::Error: no crash, no sanitizer report, no hang,
// no leak (render limits bound time and memory; reference cycles are broken after each render).
//   mode 0: the input is a template, rendered with a fixed chat context;
//   mode 1: the input is a request JSON rendered with the Qwen3.5 chat template fixture.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "core/error.h"

namespace {

using namespace specserve::chat;

const jinja::Dict& context() {
  static const jinja::Dict ctx = [] {
    const auto j = nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi <b>"},
                   {"role": "assistant", "content": "<think>\nr\n</think>\n\nok", "tool_calls": [
                     {"function": {"name": "f", "arguments": {"a": [1, 2.5, null, true], "b": "x"}}}]},
                   {"role": "tool", "content": "res"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"})");
    jinja::Dict d;
    for (auto it = j.begin(); it != j.end(); ++it)
      d.set(jinja::Value::string(it.key()), jinja::Value::from_json(it.value()));
    return d;
  }();
  return ctx;
}

const ChatTemplate& qwen35() {
  static const ChatTemplate t =
      ChatTemplate::load(std::filesystem::path(__FILE__).parent_path().parent_path() / "tests/fixtures/chat/qwen3_5");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  jinja::RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_call_depth = 50;
  try {
    if (data[0] % 2 == 0) {
      (void)jinja::Template::parse(input).render(context(), limits);
    } else {
      (void)qwen35().render_json(input);
    }
  } catch (const specserve::Error&) {
  }
  return 0;
}
