// Hostile or broken templates and inputs end in a clear specserve::Error, never a crash or hang:
// syntax errors with line numbers, evaluation budget, output size, recursion, deep nesting,
// self-containing namespaces, bad requests.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "core/error.h"

namespace specserve::chat {
namespace {

using jinja::Dict;
using jinja::RenderLimits;
using jinja::Template;
using jinja::Value;

std::string render(const std::string& src, const RenderLimits& limits = {}) {
  return Template::parse(src).render(Dict{}, limits);
}

std::string error_of(const std::string& src, const RenderLimits& limits = {}) {
  try {
    render(src, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JinjaRobustness, SyntaxErrorsNameTheLine) {
  EXPECT_NE(error_of("a\nb\n{% if x %}").find("line 3"), std::string::npos) << error_of("a\nb\n{% if x %}");
  EXPECT_NE(error_of("{{ 1 + }}").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("{% for %}").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("{{ x | nosuch }}").find("No filter named 'nosuch'"), std::string::npos);
  EXPECT_NE(error_of("{% include 'x' %}").find("not supported"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("{{ (1, 2 }}").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
}

TEST(JinjaRobustness, RuntimeErrorsNameTheLine) {
  const std::string e = error_of("ok\n{{ raise_exception('boom: ' ~ 1) }}");
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("boom: 1"), std::string::npos) << e;
}

TEST(JinjaRobustness, InfiniteWorkIsBounded) {
  RenderLimits l;
  l.max_steps = 100000;
  EXPECT_NE(
      error_of("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", l).find("budget"),
      std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000)|length }}").find("Range too big"), std::string::npos);
}

TEST(JinjaRobustness, HugeOutputIsBounded) {
  RenderLimits l;
  l.max_output_bytes = 1 << 16;
  EXPECT_NE(error_of("{{ 'x' * 100000000 }}", l).find("exceeds"), std::string::npos);
  EXPECT_NE(
      error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", l)
          .find("exceeds"),
      std::string::npos);
  EXPECT_NE(error_of("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", l).find("exceeds"), std::string::npos);
}

TEST(JinjaRobustness, RecursionIsBounded) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("recursion"), std::string::npos);
  std::string deep = "{{ ";
  for (int i = 0; i < 5000; ++i) deep += "(";
  deep += "1";
  for (int i = 0; i < 5000; ++i) deep += ")";
  deep += " }}";
  EXPECT_NE(error_of(deep).find("nested too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_NE(error_of(ifs).find("syntax error"), std::string::npos);
}

TEST(JinjaRobustness, DeepValuesAndSelfReferenceAreErrors) {
  EXPECT_NE(
      error_of("{% set ns = namespace(x=[]) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}")
          .find("nested deeper"),
      std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("recursion"), std::string::npos);
  // A cycle through a namespace and a macro must not leak (checked under ASan / LSan in the fuzz
  // build); here it must simply render.
  EXPECT_EQ(
      render(
          "{% set ns = namespace() %}{% macro m() %}M{% endmacro %}{% set ns.m = m %}{% set ns.self = ns %}{{ ns.m() }}"),
      "M");
}

// A {% call %} body that calls caller() itself has no caller: an error naming it (found by the fuzzer:
// the undefined value carried no hint, and the error message read through a null pointer).
TEST(JinjaRobustness, CallerInsideACallBodyIsUndefined) {
  const std::string src =
      "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}[{{ caller() }}]{% endcall %}";
  EXPECT_NE(error_of(src).find("'caller' is undefined"), std::string::npos) << error_of(src);
  EXPECT_NE(error_of("{{ caller() }}").find("'caller' is undefined"), std::string::npos) << error_of("{{ caller() }}");
  EXPECT_EQ(render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}in{% endcall %}"), "<in>");
}

TEST(JinjaRobustness, MacroOutlivingItsFrameStillWorks) {
  EXPECT_EQ(
      render("{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}in{% endmacro %}{% set ns.m = m %}{% endfor %}"
             "{{ ns.m() }}"),
      "in");
}

TEST(JinjaRobustness, BadRequests) {
  const ChatTemplate t = ChatTemplate::from_source("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_THROW(t.render_json("not json"), Error);
  EXPECT_THROW(t.render_json("[]"), Error);
  EXPECT_THROW(t.render_json(R"({"messages": []})"), Error);
  EXPECT_THROW(t.render_json(R"({"messages": [1]})"), Error);
  EXPECT_THROW(t.render_json(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})"), Error);
  std::string deep = R"({"messages": [{"role": "user", "content": )";
  for (int i = 0; i < 100000; ++i) deep += "[";
  for (int i = 0; i < 100000; ++i) deep += "]";
  deep += "}]}";
  EXPECT_THROW(t.render_json(deep), Error);
  EXPECT_EQ(t.render_json(R"({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]})"),
            "xy");
}

TEST(ChatTemplateApi, KwargsSpecialTokensAndContinue) {
  const ChatTemplate t = ChatTemplate::from_source(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}GEN{% endif %}"
      "{{ flag }}",
      {{"bos_token", "<s>"}});
  nlohmann::ordered_json r = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"add_generation_prompt", true}};
  EXPECT_EQ(t.render(r), "<s>[user:hi]GEN");
  r["chat_template_kwargs"] = {{"flag", "F"}};
  EXPECT_EQ(t.render(r), "<s>[user:hi]GENF");
  r["flag"] = "top";  // top-level kwargs win over chat_template_kwargs
  EXPECT_EQ(t.render(r), "<s>[user:hi]GENtop");
  nlohmann::ordered_json c = {{"messages", {{{"role", "assistant"}, {"content", "partial"}}}},
                              {"continue_final_message", true}};
  EXPECT_EQ(ChatTemplate::from_source("{% for m in messages %}<{{ m.content }}>{% endfor %}").render(c), "<partial");
}

TEST(ChatTemplateApi, NamedTemplatesInTokenizerConfig) {
  const nlohmann::json config = {
      {"chat_template", {{{"name", "default"}, {"template", "D"}}, {{"name", "tool_use"}, {"template", "T"}}}},
      {"eos_token", {{"content", "</s>"}, {"lstrip", false}}}};
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(config);
  EXPECT_EQ(t.render_json(R"({"messages": [{"role": "user", "content": "x"}]})"), "D");
  EXPECT_EQ(t.render_json(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})"), "T");
  EXPECT_EQ(t.special_tokens().at("eos_token"), "</s>");
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(nlohmann::json{{"x", 1}}), Error);
}

TEST(ChatTemplateApi, KeyOrderIsKept) {
  const ChatTemplate t = ChatTemplate::from_source("{{ tools[0]|tojson }}");
  EXPECT_EQ(
      t.render_json(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"z": 1, "a": {"y": 2, "b": 3}}]})"),
      R"({"z": 1, "a": {"y": 2, "b": 3}})");
}

}  // namespace
}  // namespace specserve::chat
