#pragma once
// Added tokens (tokenizer.json "added_tokens"): matched in the text before normalisation and
// pre-tokenization, leftmost-longest, as Hugging Face's AddedVocabulary does it:
//  - tokens with normalized=false are matched in the raw text, those with normalized=true in the
//    normalized remainder (their content normalized the same way);
//  - lstrip / rstrip absorb the whitespace left / right of a match into the token;
//  - single_word tokens only match when not touching a word character on either side;
//  - with split_special_tokens, special tokens are not matched (they are encoded as text) and,
//    like a rejected single_word match, the scan resumes after them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specserve::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A run of the text: either an added token or plain text to normalise and tokenize.
struct Segment {
  uint32_t begin = 0;
  uint32_t end = 0;
  int32_t token = -1;  // added token id, or -1 for text
};

// Leftmost-longest matching over a set of byte strings.
class TokenTrie {
 public:
  void insert(std::string_view key, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // Longest key that starts at text[pos]: its length (0 if none) and value.
  size_t longest_at(std::string_view text, size_t pos, int32_t& value) const;
  // True when some key starts with byte b (cheap pre-filter for the scan).
  bool may_start(unsigned char b) const { return first_[b]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> next;  // sorted by byte
    int32_t value = -1;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_[256] = {};
};

class AddedVocab {
 public:
  // `normalize` maps the content of normalized=true tokens into the normalized space.
  template <typename NormalizeFn>
  void build(std::vector<AddedToken> tokens, NormalizeFn&& normalize) {
    tokens_ = std::move(tokens);
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const auto& t = tokens_[i];
      if (t.content.empty()) continue;
      if (t.normalized) {
        normalized_.insert(normalize(t.content), static_cast<int32_t>(i));
      } else {
        raw_.insert(t.content, static_cast<int32_t>(i));
      }
    }
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Splits `text` on the raw (normalized=false) or the normalized tokens; appends segments that
  // cover text. Offsets are relative to text.
  void split(std::string_view text, bool normalized_set, bool split_special, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  TokenTrie raw_, normalized_;
};

}  // namespace specserve::tokenizer
