#pragma once
// tokenizer.json pre-tokenizers: Split (regex or string pattern, every HF behaviour, invert),
// ByteLevel (add_prefix_space, use_regex) and Sequence. The byte -> char mapping of ByteLevel is
// implicit: words stay raw bytes and the BPE model works on bytes.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/split_matcher.h"

namespace specserve::tokenizer {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // From the tokenizer.json "pre_tokenizer" value (null: the whole piece is one word).
  // allow_fast=false forces PCRE2 for every regex (tests compare the two).
  static PreTokenizer from_json(const nlohmann::json& j, bool allow_fast = true);

  bool has_byte_level() const;

  // Splits `text` into words (spans of `text`, in order, never empty). `text` is rewritten when a
  // ByteLevel step adds prefix spaces.
  void split(std::string& text, std::vector<Span>& words) const;

  std::string describe() const;

  struct Step;  // one Split or ByteLevel step (defined in pre_tokenizer.cpp)

 private:
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace specserve::tokenizer
