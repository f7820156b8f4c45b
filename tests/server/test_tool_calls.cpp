// Qwen tool-call parsing: hermes JSON (Qwen3) and qwen3_coder XML (Qwen3.5/3.6), typed by schema.
#include <gtest/gtest.h>

#include "server/tool_calls.h"

using namespace specserve::server;
using nlohmann::json;

TEST(ToolCalls, Qwen3Json) {
  std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n</tool_call>";
  ToolCallParse p = parse_tool_calls(text, nullptr);
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), (json{{"city", "Paris"}, {"days", 2}}));
  EXPECT_EQ(p.calls[1].name, "time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  EXPECT_EQ(p.calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCalls, Qwen35XmlTypedBySchema) {
  json tools = json::parse(R"([{"type":"function","function":{"name":"search","parameters":{"type":"object",
      "properties":{"query":{"type":"string"},"limit":{"type":"integer"},"exact":{"type":"boolean"},
      "filters":{"type":"object"},"code":{"type":"string"}}}}}])");
  std::string text =
      "<tool_call>\n<function=search>\n<parameter=query>\nred shoes\n</parameter>\n<parameter=limit>\n5\n</parameter>\n"
      "<parameter=exact>\ntrue\n</parameter>\n<parameter=filters>\n{\"size\": 42}\n</parameter>\n"
      "<parameter=code>\n123\n</parameter>\n</function>\n</tool_call>";
  ToolCallParse p = parse_tool_calls(text, &tools);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "search");
  json args = json::parse(p.calls[0].arguments);
  EXPECT_EQ(args["query"], "red shoes");
  EXPECT_EQ(args["limit"], 5);
  EXPECT_EQ(args["exact"], true);
  EXPECT_EQ(args["filters"], (json{{"size", 42}}));
  EXPECT_EQ(args["code"], "123");  // a string parameter stays a string
  EXPECT_EQ(p.content, "");
}

TEST(ToolCalls, MultilineXmlValueKept) {
  std::string text =
      "<tool_call>\n<function=write>\n<parameter=body>\nline 1\nline 2\n</parameter>\n</function>\n</tool_call>";
  ToolCallParse p = parse_tool_calls(text, nullptr);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments)["body"], "line 1\nline 2");
}

TEST(ToolCalls, MalformedBlockStaysContent) {
  std::string text = "x <tool_call>\nnot a call\n</tool_call>";
  ToolCallParse p = parse_tool_calls(text, nullptr);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

TEST(ToolCalls, UnclosedFinalBlockIsTried) {
  ToolCallParse p = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}", nullptr);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
}

TEST(ToolCalls, StreamHoldsFromTheTag) {
  ToolCallStream s(nullptr);
  std::string released;
  std::string text = "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  for (char c : text) released += s.feed(std::string(1, c));
  EXPECT_EQ(released, "Sure.");
  ToolCallParse p = s.finish();
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");

  ToolCallStream plain(nullptr);
  std::string out;
  for (char c : std::string("a <tool b")) out += plain.feed(std::string(1, c));
  out += plain.finish().content;
  EXPECT_EQ(out, "a <tool b");
}
