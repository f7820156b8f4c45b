#pragma once
// A small byte-level BPE tokenizer in the Qwen2/Qwen3 tokenizer.json format: the 256 GPT-2 byte
// symbols as ids 0..255 (in GPT-2's byte-to-unicode order, as in Qwen's vocab), merges learned by a
// plain BPE pass over a built-in code-and-prose text, and the ChatML special tokens after them.
#include <cstdint>
#include <string>
#include <vector>

namespace specserve::tiny {

struct TinyTokenizer {
  std::vector<std::string> vocab;           // id -> token text (byte symbols, then merge results)
  std::vector<std::string> merges;          // "a b", in rank order
  std::vector<std::string> special_tokens;  // <|endoftext|>, <|im_start|>, <|im_end|>; ids follow vocab
  int64_t special_id(const std::string& token) const;
  int64_t size() const { return static_cast<int64_t>(vocab.size() + special_tokens.size()); }
};

// The printable stand-in GPT-2 uses for a byte, UTF-8 encoded ("Ġ" for the space byte).
std::string gpt2_byte_symbol(uint8_t byte);
// The 256 bytes in GPT-2's byte-to-unicode order: printable Latin-1 first, then the rest.
std::vector<uint8_t> gpt2_byte_order();

// Learns up to `max_merges` merges (pairs seen at least twice) on the built-in text. Deterministic.
TinyTokenizer build_tiny_tokenizer(int max_merges);

std::string tokenizer_json(const TinyTokenizer& t);
std::string tokenizer_config_json(const TinyTokenizer& t);

}  // namespace specserve::tiny
