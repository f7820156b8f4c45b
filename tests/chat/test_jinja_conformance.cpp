// The Jinja interpreter against Jinja2 3.1.6 in transformers' chat-template environment, case by
// case (tests/fixtures/chat/expected.json "jinja": output text, or an error).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "chat/jinja_template.h"
#include "core/error.h"

namespace specserve::chat::jinja {
namespace {

nlohmann::ordered_json load_cases() {
  std::ifstream in(std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/chat/expected.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str())["jinja"];
}

TEST(JinjaConformance, MatchesJinja2) {
  const nlohmann::ordered_json cases = load_cases();
  ASSERT_GT(cases.size(), 100u);
  size_t failures = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    Dict ctx;
    for (auto it = c["context"].begin(); it != c["context"].end(); ++it)
      ctx.set(Value::string(it.key()), Value::from_json(it.value()));
    std::string out, err;
    try {
      out = Template::parse(c["template"].get<std::string>()).render(ctx);
    } catch (const Error& e) {
      err = e.what();
    }
    if (c.contains("error")) {
      if (err.empty()) {
        ++failures;
        ADD_FAILURE() << name << ": expected error " << c["error"] << ", got " << nlohmann::json(out).dump();
      }
    } else if (!err.empty()) {
      ++failures;
      ADD_FAILURE() << name << ": unexpected error: " << err << "\n  template " << c["template"];
    } else if (out != c["text"].get<std::string>()) {
      ++failures;
      ADD_FAILURE() << name << "\n  got  " << nlohmann::json(out).dump() << "\n  want " << c["text"] << "\n  template "
                    << c["template"];
    }
  }
  EXPECT_EQ(failures, 0u);
}

}  // namespace
}  // namespace specserve::chat::jinja
