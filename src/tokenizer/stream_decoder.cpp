#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

std::string StreamDecoder::push(int32_t id) {
  if (!tokenizer_->is_known(id)) return {};
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  pending_ += tokenizer_->token_bytes(id);
  const size_t stable = utf8_stable_prefix(pending_);
  if (stable == 0) return {};
  std::string out = repair_utf8(std::string_view(pending_).substr(0, stable));
  pending_.erase(0, stable);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = repair_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace specserve::tokenizer
