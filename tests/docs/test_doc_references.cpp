// Every citation of a document in the repository's text files points at a file and a numbered
// heading that exist (doc_references.h has the rules), and nothing cites the notes that live outside
// the repository. The first test scans the tree; the others show on small made-up trees that each
// kind of dangling reference is caught.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "doc_references.h"

namespace specserve::docs_test {
namespace {

// Folders and top-level files whose text may cite documents, and the file kinds read in them.
const char* const kScannedFolders[] = {"src", "tests", "tools", "fuzz", "bench", "scripts", "docs", ".ci"};
const char* const kScannedRootFiles[] = {"README.md", "CMakeLists.txt", "run.sh", "test.sh", ".ci/run"};
const char* const kTextExtensions[] = {".h",  ".hpp", ".cc", ".cpp", ".cu",    ".cuh", ".c",
                                       ".py", ".sh",  ".md", ".txt", ".cmake", ".in",  ".toml"};
// This test's own folder holds deliberately broken references (the made-up trees below) and the
// checker's description of the citation forms.
const char* const kThisTestsFolder = "tests/docs/";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool is_text_source(const fs::path& p) {
  if (p.filename() == "CMakeLists.txt") return true;
  const std::string ext = p.extension().string();
  for (const char* e : kTextExtensions)
    if (ext == e) return true;
  return false;
}

// Folders that are not the project's text: installed packages, caches, hidden tool folders.
bool is_generated_folder(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "node_modules" || name == "__pycache__" || (name.size() > 1 && name[0] == '.');
}

std::vector<std::string> scanned_files(const fs::path& root) {
  std::vector<std::string> out;
  for (const char* f : kScannedRootFiles)
    if (fs::is_regular_file(root / f)) out.push_back(f);
  for (const char* folder : kScannedFolders) {
    if (!fs::is_directory(root / folder)) continue;
    for (auto it = fs::recursive_directory_iterator(root / folder); it != fs::recursive_directory_iterator(); ++it) {
      const fs::directory_entry& e = *it;
      if (e.is_directory() && is_generated_folder(e.path())) {
        it.disable_recursion_pending();
        continue;
      }
      if (!e.is_regular_file() || !is_text_source(e.path())) continue;
      if (e.file_size() > (4u << 20)) continue;  // data, not prose
      const std::string rel = fs::relative(e.path(), root).generic_string();
      if (rel.rfind(kThisTestsFolder, 0) != 0) out.push_back(rel);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(DocReferences, EveryCitationInTheRepositoryResolves) {
  const fs::path root = SPECSERVE_SOURCE_DIR;
  DocReferenceChecker checker(root);
  std::vector<std::string> problems;
  const std::vector<std::string> files = scanned_files(root);
  ASSERT_GT(files.size(), 100u) << "the scan found almost no files under " << root;
  for (const std::string& rel : files) {
    for (std::string& p : checker.check(rel, read_file(root / rel))) problems.push_back(std::move(p));
  }
  EXPECT_TRUE(problems.empty()) << problems.size() << " dangling references:\n" << joined(problems);
}

// A reader follows the files the documents name (docs/DESIGN.md §2.3 walks a request through them), so
// every repository path a top-level document names must exist. docs/history/ records the past and may
// name files that are gone.
TEST(DocReferences, EveryFileTheDocumentsNameExists) {
  const fs::path root = SPECSERVE_SOURCE_DIR;
  std::vector<std::string> problems;
  int docs = 0;
  for (const auto& e : fs::directory_iterator(root / "docs")) {
    if (!e.is_regular_file() || e.path().extension() != ".md") continue;
    ++docs;
    const std::string rel = "docs/" + e.path().filename().string();
    for (std::string& p : missing_named_paths(root, rel, read_file(e.path()))) problems.push_back(std::move(p));
  }
  ASSERT_GT(docs, 3);
  EXPECT_TRUE(problems.empty()) << problems.size() << " missing files:\n" << joined(problems);
}

TEST(DocReferences, TheDesignDocumentHasTheSectionsTheCodeLeansOn) {
  const std::set<std::string> h = numbered_headings(fs::path(SPECSERVE_SOURCE_DIR) / "docs/DESIGN.md");
  for (const char* s : {"1", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2"}) EXPECT_TRUE(h.count(s)) << s;
}

// A made-up repository: docs/GUIDE.md with sections 1, 1.1, 1.2 and 2.
class MadeUpTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("specserve_doc_refs_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "docs");
    fs::create_directories(root_ / "src");
    std::ofstream(root_ / "docs/GUIDE.md") << "# Guide\n\n## 1. First\n\n### 1.1 One\n\n### 1.2. Two\n\n"
                                              "## 2. Second\n\nSee §1.1 and §2.\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<std::string> check(const std::string& rel, const std::string& text) {
    return DocReferenceChecker(root_).check(rel, text);
  }

  fs::path root_;
};

TEST_F(MadeUpTree, CitationsOfExistingHeadingsPass) {
  EXPECT_TRUE(check("src/a.cpp", "// the rule (docs/GUIDE.md §1.2; also §2)\n").empty());
  EXPECT_TRUE(check("src/a.cpp", "// docs/GUIDE.md §1.1–1.2, GUIDE.md §1\n").empty());
  EXPECT_TRUE(check("src/a.cpp", "// `docs/GUIDE.md` §1, §2 and docs/GUIDE.md §1.1/§1.2.\n").empty());
  EXPECT_TRUE(check("docs/GUIDE.md", read_file(root_ / "docs/GUIDE.md")).empty());
  // A § with no document on its line belongs to an earlier line: not checked.
  EXPECT_TRUE(check("src/a.cpp", "// docs/GUIDE.md says, in\n// §7, that\n").empty());
}

TEST_F(MadeUpTree, AHeadingThatDoesNotExistIsCaught) {
  const auto p = check("src/a.cpp", "int x;\n// the rule (docs/GUIDE.md §1.3)\n");
  ASSERT_EQ(p.size(), 1u) << joined(p);
  EXPECT_NE(p[0].find("src/a.cpp:2:"), std::string::npos) << p[0];
  EXPECT_NE(p[0].find("§1.3"), std::string::npos) << p[0];
}

TEST_F(MadeUpTree, EveryPartOfAListOrRangeIsChecked) {
  EXPECT_EQ(check("src/a.cpp", "// docs/GUIDE.md §1.1–1.4\n").size(), 1u);
  EXPECT_EQ(check("src/a.cpp", "// docs/GUIDE.md §1, §3 and §2.1\n").size(), 2u);
  EXPECT_EQ(check("src/a.cpp", "// docs/GUIDE.md §2/§9\n").size(), 1u);
}

TEST_F(MadeUpTree, ASectionReferenceInsideADocumentIsCheckedAgainstItself) {
  EXPECT_EQ(check("docs/GUIDE.md", "Details in §4.\n").size(), 1u);
}

TEST_F(MadeUpTree, AMissingDocumentIsCaught) {
  const auto p = check("src/a.cpp", "// see docs/MISSING.md §1\n");
  ASSERT_EQ(p.size(), 1u) << joined(p);
  EXPECT_NE(p[0].find("docs/MISSING.md"), std::string::npos) << p[0];
}

TEST_F(MadeUpTree, DocumentsOutsideTheRepositoryAreCaught) {
  // Spelled in pieces so that a search of the tree for these names does not find this file.
  const std::string outside_name = std::string("dflash") + ".md";
  const std::string outside_path = std::string("..") + "/shared/docs/";
  EXPECT_EQ(check("src/a.cpp", "// (" + outside_name + " §1)\n").size(), 1u);
  EXPECT_FALSE(check("tools/t.py", "# Specs: `" + outside_path + "notes`\n").empty());
  EXPECT_FALSE(check("src/a.cpp", "// (docs/" + outside_name + ")\n").empty());
}

TEST_F(MadeUpTree, AFileADocumentNamesMustExist) {
  std::ofstream(root_ / "src/a.h") << "// a\n";
  std::ofstream(root_ / "src/a.cpp") << "// a\n";
  EXPECT_TRUE(missing_named_paths(root_, "docs/GUIDE.md", "See `src/a.h` and `src/a.{h,cpp}`, `src/*.cc`.\n").empty());
  const auto p = missing_named_paths(root_, "docs/GUIDE.md", "Two: `src/b.cpp`, `src/a.{h,hpp}`.\n");
  ASSERT_EQ(p.size(), 2u) << joined(p);
  EXPECT_NE(p[0].find("src/b.cpp"), std::string::npos) << p[0];
  EXPECT_NE(p[1].find("src/a.hpp"), std::string::npos) << p[1];
}

TEST_F(MadeUpTree, ThePlaceholderOfTheCitationFormIsNotACitation) {
  EXPECT_TRUE(check("docs/GUIDE.md", "Cite a document as `docs/NAME.md §N`.\n").empty());
}

TEST_F(MadeUpTree, UrlsAreNotCitations) {
  EXPECT_TRUE(check("docs/GUIDE.md", "From https://github.com/x/y/blob/main/README.md §9.\n").empty());
}

}  // namespace
}  // namespace specserve::docs_test
