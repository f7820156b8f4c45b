#pragma once
// The checker behind test_doc_references.cpp: every document a text file of the repository cites
// exists, and every section it cites by number ("docs/DESIGN.md §1.4", "§1.4–1.5", "§2.4/§3.6") is a
// numbered heading of that document ("### 1.4 ..."). Documents outside the repository (the lower-case
// design / dflash / models / dependencies / peers notes, the shared folder beside the checkout) are never
// cited.
//
// Resolution of a cited NAME.md (NAME starts with a capital letter): as written from the repository
// root, as written from the citing file's folder, and, for a bare or `docs/` name, docs/NAME.md and
// NAME.md at the root. A `§N` belongs to the last document cited before it on the same line; in a
// Markdown file under docs/, a `§N` with no document before it refers to the file itself. A `§N`
// elsewhere with no document on its line is not checked (its document is on an earlier line).
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace specserve::docs_test {

namespace fs = std::filesystem;

// The folder beside the checkout that holds notes outside the repository, spelled in two pieces so that
// a search of the tree for it finds no file.
inline const std::string kSharedFolder = std::string("..") + "/shared";

// The section numbers of a Markdown file's numbered headings: "## 3. Habits" → "3", "### 1.4 X" → "1.4".
inline std::set<std::string> numbered_headings(const fs::path& file) {
  static const std::regex heading(R"(^#+[ \t]+([0-9]+(\.[0-9]+)*)\.?[ \t])");
  std::set<std::string> out;
  std::ifstream in(file);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, heading)) out.insert(m[1].str());
  }
  return out;
}

// Repository paths a document names in backticks (`src/engine/engine.cpp`, `src/spec/x.{h,cpp}`) that do
// not exist under `root`. Paths with wildcards or placeholders (`*`, `<`, `NAME`) are not checked; a
// `{a,b}` group is expanded. Each problem is "doc:line: what is wrong".
inline std::vector<std::string> missing_named_paths(const fs::path& root, const std::string& rel_doc,
                                                    const std::string& text) {
  static const std::regex named(R"(`((src|tests|tools|scripts|fuzz|bench|docs)/[^`\s]*)`)");
  static const std::regex group(R"(\{([^}]*)\})");
  std::vector<std::string> problems;
  std::istringstream in(text);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    for (std::sregex_iterator it(line.begin(), line.end(), named), end; it != end; ++it) {
      const std::string path = (*it)[1].str();
      if (path.find_first_of("*<") != std::string::npos || path.find("NAME") != std::string::npos) continue;
      std::vector<std::string> expanded;
      std::smatch g;
      if (std::regex_search(path, g, group)) {
        std::istringstream alternatives(g[1].str());
        std::string alt;
        while (std::getline(alternatives, alt, ','))
          expanded.push_back(path.substr(0, g.position(0)) + alt + path.substr(g.position(0) + g.length(0)));
      } else {
        expanded.push_back(path);
      }
      for (std::string p : expanded) {
        while (!p.empty() && std::string(".,;:").find(p.back()) != std::string::npos) p.pop_back();
        std::error_code ec;
        if (!fs::exists(root / p, ec))
          problems.push_back(rel_doc + ":" + std::to_string(line_no) + ": names " + p + ", which does not exist");
      }
    }
  }
  return problems;
}

class DocReferenceChecker {
 public:
  explicit DocReferenceChecker(fs::path repo_root) : root_(std::move(repo_root)) {}

  // Problems in one file's text, each "path:line: what is wrong". `rel_path` is the file's path
  // relative to the repository root.
  std::vector<std::string> check(const std::string& rel_path, const std::string& text) {
    std::vector<std::string> problems;
    const fs::path file_dir = (root_ / rel_path).parent_path();
    const bool is_doc = rel_path.rfind("docs/", 0) == 0 && fs::path(rel_path).extension() == ".md";
    std::istringstream in(text);
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      auto report = [&](const std::string& what) {
        problems.push_back(rel_path + ":" + std::to_string(line_no) + ": " + what);
      };
      if (line.find(kSharedFolder) != std::string::npos)
        report("mentions " + kSharedFolder + " (outside the repository)");
      if (line.find(".md") == std::string::npos && line.find("§") == std::string::npos) continue;
      check_outside_names(line, report);
      check_citations(line, is_doc ? root_ / rel_path : fs::path(), file_dir, report);
    }
    return problems;
  }

 private:
  template <class Report>
  void check_outside_names(const std::string& line, Report& report) {
    static const std::regex outside(R"((^|[^A-Za-z0-9_])((design|dflash|models|dependencies|peers)\.md))");
    for (std::sregex_iterator it(line.begin(), line.end(), outside), end; it != end; ++it) {
      report("cites " + (*it)[2].str() + ", a document outside the repository (cite docs/NAME.md)");
    }
  }

  template <class Report>
  void check_citations(const std::string& line, const fs::path& self, const fs::path& file_dir, Report& report) {
    // A document: optional folders, then a capitalised name. A section: § and a dotted number,
    // optionally a range "§1.4–1.5" (en dash or hyphen) whose end is checked too.
    static const std::regex token(
        R"(((?:[A-Za-z0-9_.-]+/)*)([A-Z][A-Za-z0-9_-]*)\.md|§[ \t]*([0-9]+(?:\.[0-9]+)*)(?:[ \t]*(?:–|-)[ \t]*([0-9]+(?:\.[0-9]+)*))?)");
    fs::path current = self;  // the document a § refers to; empty: unknown
    for (std::sregex_iterator it(line.begin(), line.end(), token), end; it != end; ++it) {
      const std::smatch& m = *it;
      if (m[2].matched) {
        // A URL, or the placeholder of a description of the citation form ("docs/NAME.md §N").
        if (inside_url(line, static_cast<size_t>(m.position(0))) || m[2].str() == "NAME") {
          current.clear();
          continue;
        }
        const std::string written = m[1].str() + m[2].str() + ".md";
        current = resolve(m[1].str(), m[2].str() + ".md", file_dir);
        if (current.empty()) report("cites " + written + ", which does not exist");
        continue;
      }
      if (current.empty()) continue;
      for (int g : {3, 4}) {
        if (!m[g].matched) continue;
        const std::set<std::string>& sections = headings_of(current);
        if (!sections.count(m[g].str())) {
          report("cites §" + m[g].str() + " of " + fs::relative(current, root_).string() +
                 ", which has no heading numbered " + m[g].str());
        }
      }
    }
  }

  // True when the match at `pos` is part of a URL (the word it sits in contains "://").
  static bool inside_url(const std::string& line, size_t pos) {
    size_t start = pos;
    while (start > 0 && std::string(" \t(<[`\"'").find(line[start - 1]) == std::string::npos) --start;
    return line.substr(start, pos - start).find("://") != std::string::npos;
  }

  fs::path resolve(const std::string& folders, const std::string& name, const fs::path& file_dir) const {
    std::vector<fs::path> candidates = {root_ / folders / name, file_dir / folders / name};
    if (folders.empty() || folders == "docs/") {
      candidates.push_back(root_ / "docs" / name);
      candidates.push_back(root_ / name);
    }
    for (const fs::path& c : candidates) {
      std::error_code ec;
      if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c);
    }
    return {};
  }

  const std::set<std::string>& headings_of(const fs::path& doc) {
    auto it = headings_.find(doc.string());
    if (it == headings_.end()) it = headings_.emplace(doc.string(), numbered_headings(doc)).first;
    return it->second;
  }

  fs::path root_;
  std::map<std::string, std::set<std::string>> headings_;
};

}  // namespace specserve::docs_test
