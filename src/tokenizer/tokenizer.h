#pragma once
// A Hugging Face tokenizer.json byte-level BPE tokenizer (Qwen2/Qwen3/Qwen3.5, GPT-2 style):
// encode gives exactly the ids of HF `tokenizers` (encode(text, add_special_tokens=False)),
// decode the text of HF decode (ByteLevel decoder, invalid UTF-8 replaced by U+FFFD).
//
// Pipeline (as HF runs it): the text is split on added tokens matched in the raw text; each
// remaining piece is normalised, split on the normalized added tokens, pre-tokenized into words,
// and each word is BPE-merged. Input that is not valid UTF-8 is first repaired (each ill-formed
// subsequence becomes U+FFFD), since HF can only receive valid strings.
//
// Thread-safe: encode/decode are const and may run concurrently.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocab.h"

namespace specserve::tokenizer {

struct LoadOptions {
  // false: every Split regex goes through PCRE2 (used by tests to compare with the scanners).
  bool fast_splitter = true;
};

struct EncodeOptions {
  // Encode special added tokens as plain text (HF split_special_tokens / encode_special_tokens).
  // Unset: the tokenizer's default (tokenizer_config.json "split_special_tokens", else false).
  std::optional<bool> split_special_tokens;
};

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // `path` is a tokenizer.json file or a directory holding one (and optionally
  // tokenizer_config.json, read for split_special_tokens).
  static Tokenizer load(const std::filesystem::path& path, const LoadOptions& options = {});
  // From parsed tokenizer.json (and optionally tokenizer_config.json) contents.
  static Tokenizer from_json(const nlohmann::json& tokenizer_json, const nlohmann::json* tokenizer_config = nullptr,
                             const LoadOptions& options = {});

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  void encode(std::string_view text, std::vector<int32_t>& out, const EncodeOptions& options = {}) const;

  // Ids that are neither in the vocab nor added tokens are skipped, as HF does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The bytes a token contributes to decoded text (before UTF-8 repair); empty for unknown ids.
  std::string_view token_bytes(int32_t id) const;
  // The token string (byte-level spelling for vocab tokens, content for added tokens).
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  bool is_known(int32_t id) const;

  // One past the largest id (vocab and added tokens).
  int32_t id_limit() const;
  const std::vector<AddedToken>& added_tokens() const;
  bool split_special_tokens_default() const;
  std::string describe() const;

 private:
  static Tokenizer build(const nlohmann::json& tokenizer_json, const nlohmann::json* tokenizer_config,
                         const LoadOptions& options);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specserve::tokenizer
