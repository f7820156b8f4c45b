// `specserve draft-vocab`: the id list for --draft-vocab FILE, from text like the traffic a server sees.
//   specserve draft-vocab --tokenizer PATH --top N [--out FILE] [--ext .py ...] [--max-mib M] INPUT...
// Every INPUT file (a directory: its regular files, recursively, those ending in one of --ext when given)
// is tokenized and each id counted, until --max-mib MiB of text; the N most frequent ids (ties: the lower
// id) are written ascending, one per line, after '#' lines saying what they were counted from and the
// share of the counted tokens they cover. That share bounds what the drafter keeps: a target token
// outside the list ends an accepted run (the added tokens and EOS are always drafted, see
// spec/draft_vocabulary.h). The summary also goes to stderr.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace specserve::cli {

namespace {

namespace fs = std::filesystem;

struct DraftVocabArgs {
  std::string tokenizer;
  int64_t top = 0;
  std::string out = "-";
  std::vector<std::string> ext;
  int64_t max_mib = 256;
  std::vector<std::string> inputs;
};

// The files of `inputs` in a stable order (a directory's sorted by path).
std::vector<fs::path> input_files(const DraftVocabArgs& a) {
  auto wanted = [&](const fs::path& p) {
    if (a.ext.empty()) return true;
    const std::string name = p.filename().string();
    return std::any_of(a.ext.begin(), a.ext.end(), [&](const std::string& e) {
      return name.size() >= e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0;
    });
  };
  std::vector<fs::path> files;
  for (const std::string& in : a.inputs) {
    const fs::path p(in);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> found;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec) && wanted(it->path())) found.push_back(it->path());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      SS_CHECK(fs::is_regular_file(p, ec), "draft-vocab: {} is neither a file nor a directory", in);
      files.push_back(p);
    }
  }
  return files;
}

int run_draft_vocab(const DraftVocabArgs& a) {
  SS_CHECK(a.top >= 1, "draft-vocab: --top must be at least 1 (got {})", a.top);
  SS_CHECK(a.max_mib >= 1, "draft-vocab: --max-mib must be at least 1 (got {})", a.max_mib);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(a.tokenizer);
  const std::vector<fs::path> files = input_files(a);
  SS_CHECK(!files.empty(), "draft-vocab: no input files{}", a.ext.empty() ? "" : " with the --ext endings");
  std::vector<uint64_t> counts(static_cast<size_t>(tok.id_limit()), 0);
  const uint64_t budget = static_cast<uint64_t>(a.max_mib) << 20;
  uint64_t bytes = 0, tokens = 0;
  size_t used = 0;
  std::vector<int32_t> ids;
  for (const fs::path& f : files) {
    if (bytes >= budget) break;
    std::ifstream in(f, std::ios::binary);
    if (!in) continue;  // unreadable files in a directory walk are skipped
    std::ostringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    if (text.size() > budget - bytes) text.resize(budget - bytes);
    bytes += text.size();
    ++used;
    ids.clear();
    try {
      tok.encode(text, ids);
    } catch (const Error& e) {  // a file the tokenizer refuses is left out, and said so
      std::fprintf(stderr, "draft-vocab: skipping %s: %s\n", f.string().c_str(), e.what());
      continue;
    }
    for (int32_t id : ids)
      if (id >= 0 && static_cast<size_t>(id) < counts.size()) ++counts[static_cast<size_t>(id)], ++tokens;
  }
  SS_CHECK(tokens > 0, "draft-vocab: the inputs hold no text");
  std::vector<int32_t> order(counts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  const size_t n = std::min(order.size(), static_cast<size_t>(a.top));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](int32_t x, int32_t y) {
                      return counts[static_cast<size_t>(x)] != counts[static_cast<size_t>(y)]
                                 ? counts[static_cast<size_t>(x)] > counts[static_cast<size_t>(y)]
                                 : x < y;
                    });
  order.resize(n);
  uint64_t covered = 0;
  for (int32_t id : order) covered += counts[static_cast<size_t>(id)];
  std::sort(order.begin(), order.end());
  const std::string summary =
      fmt::format("the {} most frequent of {} ids cover {:.2f}% of {} tokens ({} files, {:.1f} MiB of text)", n,
                  counts.size(), 100.0 * static_cast<double>(covered) / static_cast<double>(tokens), tokens, used,
                  static_cast<double>(bytes) / (1 << 20));
  std::string out = "# specserve draft-vocab --top " + std::to_string(a.top) + ": " + summary + "\n";
  for (int32_t id : order) out += std::to_string(id) + "\n";
  if (a.out == "-") {
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  } else {
    std::ofstream f(a.out, std::ios::binary | std::ios::trunc);
    SS_CHECK(f.good(), "draft-vocab: cannot write {}", a.out);
    f << out;
    SS_CHECK(f.good(), "draft-vocab: cannot write {}", a.out);
  }
  std::fprintf(stderr, "draft-vocab: %s\n", summary.c_str());
  return 0;
}

}  // namespace

void register_draft_vocab(CLI::App& app, CommandRunner& run) {
  auto args = std::make_shared<DraftVocabArgs>();
  auto* cmd =
      app.add_subcommand("draft-vocab", "The most frequent token ids of some text: the id list for --draft-vocab FILE");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json, or a model directory holding one")->required();
  cmd->add_option("--top", args->top, "how many ids to keep")->required();
  cmd->add_option("--out", args->out, "where to write the list ('-' = stdout)")->capture_default_str();
  cmd->add_option("--ext", args->ext, "in directories, only files ending so (e.g. .py; repeatable)");
  cmd->add_option("--max-mib", args->max_mib, "stop after this much text")->capture_default_str();
  cmd->add_option("inputs", args->inputs, "text files or directories")->required();
  cmd->callback([args, &run] { run = [args] { return run_draft_vocab(*args); }; });
}

}  // namespace specserve::cli
