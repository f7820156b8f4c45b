#include "sampling/dry_breakers.h"

#include <algorithm>

#include "sampling/dry.h"

namespace specserve::sampling {
namespace {

constexpr size_t kMaxBreakerBytes = 40;

void add_unique(std::vector<std::vector<TokenId>>& out, std::vector<TokenId> seq) {
  if (std::find(out.begin(), out.end(), seq) == out.end()) out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<TokenId>> dry_breaker_sequences(
    std::span<const std::string> breakers, TokenId vocab_tokens, const std::function<std::string(TokenId)>& token_text,
    const std::function<std::vector<TokenId>(std::string_view)>& encode) {
  std::vector<std::vector<TokenId>> out;
  // Decode each token once, not once per breaker.
  std::vector<std::string> texts(static_cast<size_t>(std::max<TokenId>(vocab_tokens, 0)));
  for (TokenId id = 0; id < vocab_tokens; ++id) texts[id] = token_text(id);

  for (std::string_view breaker : breakers) {
    if (breaker.empty()) continue;
    breaker = breaker.substr(0, kMaxBreakerBytes);
    for (TokenId id = 0; id < vocab_tokens; ++id) {
      const std::string& word = texts[id];
      if (word.find(breaker) != std::string::npos) {
        add_unique(out, {id});
        continue;
      }
      // Every place where the breaker begins inside `word` and runs off its end.
      for (size_t pos = word.find(breaker[0]); pos != std::string::npos; pos = word.find(breaker[0], pos + 1)) {
        const size_t inside = word.size() - pos;  // < breaker.size(): the word does not contain it
        if (word.compare(pos, inside, breaker.substr(0, inside)) != 0) continue;
        std::vector<TokenId> seq = {id};
        std::vector<TokenId> tail = encode(breaker.substr(inside));
        if (tail.size() > DryBreakers::kMaxTailLength) tail.resize(DryBreakers::kMaxTailLength);
        seq.insert(seq.end(), tail.begin(), tail.end());
        add_unique(out, std::move(seq));
      }
    }
  }
  return out;
}

}  // namespace specserve::sampling
