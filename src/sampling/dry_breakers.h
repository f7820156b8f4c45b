#pragma once
// Turning DRY sequence-breaker strings ("\n", ":", "\"", "*") into token-id sequences, with
// llama.cpp's rule: a breaker string must cut a repeat however the tokenizer happened to split it.
//
// For every vocabulary token whose text contains the breaker, that token alone is a breaker. For
// every token whose text ends with a proper prefix of the breaker (the breaker starts inside the
// token and continues past its end), the sequence [token, encode(rest of the breaker)...] is a
// breaker. Breakers longer than 40 bytes are cut to 40, tails to DryBreakers::kMaxTailLength.
//
// The tokenizer is reached through two callbacks so this layer does not depend on it.
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/types.h"

namespace specserve::sampling {

// token_text(id): the token's decoded bytes. encode(text): token ids of `text` (no special tokens).
std::vector<std::vector<TokenId>> dry_breaker_sequences(
    std::span<const std::string> breakers, TokenId vocab_tokens, const std::function<std::string(TokenId)>& token_text,
    const std::function<std::vector<TokenId>(std::string_view)>& encode);

}  // namespace specserve::sampling
