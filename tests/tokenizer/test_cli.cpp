// The stable CLI (external checks use it): `specserve tokenize` and `specserve chat-template`,
// run as a process on fixture data. The binary is built by ./test.sh before ctest runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/wait.h>

#include "tokenizer/unicode.h"
#include "tokenizer_fixtures.h"

#include <unistd.h>
#include <sstream>

namespace specserve::tokenizer::testing {
namespace {

std::filesystem::path binary() { return std::filesystem::path(SPECSERVE_BINARY_DIR) / "bin/specserve"; }

// Runs a command; returns its exit status and stdout.
int run(const std::string& cmd, std::string& out) {
  out.clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::filesystem::path temp_file(const std::string& name, const std::string& content) {
  const auto path =
      std::filesystem::temp_directory_path() / ("specserve_cli_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(binary())) << binary() << " is missing (build the specserve target)";
  }
};

TEST_F(Cli, TokenizeMatchesHuggingFace) {
  const auto dir = qwen3_dir();
  ASSERT_FALSE(dir.empty());
  std::string input;
  for (const auto& line : corpus()) input += nlohmann::json(line).dump() + "\n";
  const auto in = temp_file("in.jsonl", input);
  std::string out;
  ASSERT_EQ(run(binary().string() + " tokenize --tokenizer " + dir.string() + " --input-jsonl " + in.string(), out), 0);
  const auto expected = read_jsonl(fixture_dir() / "ids_qwen3.jsonl");
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, expected.size());
    EXPECT_EQ(nlohmann::json::parse(line)["ids"], expected[i]["ids"]) << "line " << i;
    ++i;
  }
  EXPECT_EQ(i, corpus().size());

  // --decode round trip, and tokenizer.json given as a file.
  const auto ids_in = temp_file("ids.jsonl", out);
  std::string decoded;
  ASSERT_EQ(run(binary().string() + " tokenize --decode --tokenizer " + (dir / "tokenizer.json").string() +
                    " --input-jsonl " + ids_in.string(),
                decoded),
            0);
  std::istringstream dl(decoded);
  i = 0;
  while (std::getline(dl, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["text"].get<std::string>(), normalize(corpus()[i], NormalForm::NFC)) << i;
    ++i;
  }
  EXPECT_EQ(i, corpus().size());
  std::filesystem::remove(in);
  std::filesystem::remove(ids_in);
}

TEST_F(Cli, TokenizeErrorsExitNonZero) {
  std::string out;
  const auto bad = temp_file("bad.jsonl", "\"ok\"\nnot json\n");
  EXPECT_NE(run(binary().string() + " tokenize --tokenizer " + (fixture_dir() / "gpt2_style").string() +
                    " --input-jsonl " + bad.string() + " 2>/dev/null",
                out),
            0);
  EXPECT_NE(
      run(binary().string() + " tokenize --tokenizer /nonexistent --input-jsonl " + bad.string() + " 2>/dev/null", out),
      0);
  std::filesystem::remove(bad);
}

TEST_F(Cli, ChatTemplateMatchesTransformers) {
  const auto expected = nlohmann::ordered_json::parse(read_text(source_dir() / "tests/fixtures/chat/expected.json"));
  size_t n = 0;
  for (const auto& c : expected["chat"]) {
    if (c.contains("custom_template") || c["template"] != "qwen3_5") continue;
    const auto req = temp_file("req.json", c["request"].dump());
    const auto dir = source_dir() / "tests/fixtures/chat/qwen3_5";
    std::string out;
    const int rc = run(binary().string() + " chat-template --tokenizer " + dir.string() + " --request-file " +
                           req.string() + " 2>/dev/null",
                       out);
    if (c.contains("error")) {
      EXPECT_NE(rc, 0) << c["name"];
    } else {
      EXPECT_EQ(rc, 0) << c["name"];
      EXPECT_EQ(out, c["text"].get<std::string>()) << c["name"];
      std::string json_out;
      run(binary().string() + " chat-template --json --tokenizer " + dir.string() + " --request-file " + req.string(),
          json_out);
      EXPECT_EQ(nlohmann::json::parse(json_out)["text"], c["text"]) << c["name"];
    }
    std::filesystem::remove(req);
    ++n;
  }
  EXPECT_GT(n, 20u);
}

}  // namespace
}  // namespace specserve::tokenizer::testing
