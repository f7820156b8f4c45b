// `specserve draft-vocab`: counts the ids of some text with a model's tokenizer and writes the most
// frequent ones, ascending, in the format --draft-vocab FILE reads back (spec/draft_vocabulary.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../specserve_cli.h"
#include "spec/draft_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace specserve::testing {
namespace {

namespace fs = std::filesystem;

const std::string kDemo = std::string(SPECSERVE_SOURCE_DIR) + "/models/demo-coder/target";

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("specserve-draft-vocab-cli-" + std::to_string(getpid()));
  Scratch() { fs::create_directories(dir / "src" / "pkg"); }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
};

TEST(DraftVocabCli, TheMostFrequentIdsAscendingAndReadBack) {
  Scratch s;
  const std::string code = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return f(y) * 2\n";
  s.write("src/a.py", code);
  s.write("src/pkg/b.py", code + "class C:\n    pass\n");
  s.write("src/notes.txt", "zzzz qqqq vvvv");  // left out by --ext .py
  const std::string out = (s.dir / "ids.txt").string();
  const CliRun r = run_specserve("draft-vocab --tokenizer " + kDemo + " --top 10 --ext .py --out " + out + " " +
                                 (s.dir / "src").string());
  ASSERT_EQ(r.status, 0);
  std::ifstream in(out);
  std::string line, header;
  std::getline(in, header);
  EXPECT_NE(header.find("the 10 most frequent of 8192 ids cover"), std::string::npos) << header;
  EXPECT_NE(header.find("2 files"), std::string::npos) << header;
  std::vector<int32_t> ids;
  while (std::getline(in, line)) ids.push_back(std::stoi(line));
  ASSERT_EQ(ids.size(), 10u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  // The ids are the text's most frequent: every id of "    return" is among them.
  const auto tok = tokenizer::Tokenizer::load(kDemo);
  std::vector<int32_t> ret;
  tok.encode("\n    return", ret);
  for (int32_t id : ret) EXPECT_TRUE(std::binary_search(ids.begin(), ids.end(), id)) << id;
  // What --draft-vocab FILE makes of it: the same ids plus the ones always drafted.
  const std::vector<int32_t> always = {8191};
  std::vector<int32_t> want = ids;
  want.push_back(8191);
  EXPECT_EQ(spec::draft_vocabulary(out, always, 8192), want);
}

TEST(DraftVocabCli, RefusesNonsense) {
  Scratch s;
  const std::string f = s.write("a.py", "x = 1\n");
  EXPECT_NE(run_specserve("draft-vocab --tokenizer " + kDemo + " --top 0 " + f).status, 0);
  EXPECT_NE(run_specserve("draft-vocab --tokenizer " + kDemo + " --top 5 /nonexistent/file.py").status, 0);
  EXPECT_NE(run_specserve("draft-vocab --tokenizer " + kDemo + " --top 5 --ext .rs " + s.dir.string()).status, 0);
  EXPECT_NE(run_specserve("draft-vocab --tokenizer " + kDemo + " --top 5 " + s.write("empty.py", "")).status, 0);
  EXPECT_NE(run_specserve("draft-vocab --top 5 " + f).status, 0);  // --tokenizer is required
  // To stdout: a header and 3 ids.
  const CliRun r = run_specserve("draft-vocab --tokenizer " + kDemo + " --top 3 " + f);
  ASSERT_EQ(r.status, 0);
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) n += line.empty() || line[0] == '#' ? 0 : 1;
  EXPECT_EQ(n, 3);
}

}  // namespace
}  // namespace specserve::testing
