#pragma once
// Incremental detokenization for streamed generation. push() returns the text that became final
// with this token: as soon as the bytes form complete UTF-8 it is emitted, a multi-byte character
// is never split, and the concatenation of everything returned (including finish()) equals
// Tokenizer::decode of all the ids pushed.
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace specserve::tokenizer {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

  // Text made final by this token (possibly empty while a character is incomplete).
  std::string push(int32_t id);
  // The rest: held bytes of an incomplete character become U+FFFD, as decode() would give.
  std::string finish();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace specserve::tokenizer
