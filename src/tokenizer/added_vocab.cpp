#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

void TokenTrie::insert(std::string_view key, int32_t value) {
  uint32_t node = 0;
  for (unsigned char b : key) {
    auto& next = nodes_[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, unsigned char x) { return e.first < x; });
    if (it != next.end() && it->first == b) {
      node = it->second;
    } else {
      const auto child = static_cast<uint32_t>(nodes_.size());
      next.insert(it, {b, child});
      nodes_.push_back(Node{});
      node = child;
    }
  }
  if (nodes_[node].value < 0) nodes_[node].value = value;  // the first token with a content wins
  if (!key.empty()) first_[static_cast<unsigned char>(key[0])] = true;
}

size_t TokenTrie::longest_at(std::string_view text, size_t pos, int32_t& value) const {
  uint32_t node = 0;
  size_t best = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& next = nodes_[node].next;
    const auto b = static_cast<unsigned char>(text[i]);
    auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, unsigned char x) { return e.first < x; });
    if (it == next.end() || it->first != b) break;
    node = it->second;
    if (nodes_[node].value >= 0) {
      best = i + 1 - pos;
      value = nodes_[node].value;
    }
  }
  return best;
}

namespace {

// The char before `pos` / at `pos` (text is valid UTF-8).
uint32_t char_before(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t len;
  return decode_valid_utf8(reinterpret_cast<const unsigned char*>(text.data()) + start, len);
}
uint32_t char_at(std::string_view text, size_t pos, size_t& len) {
  return decode_valid_utf8(reinterpret_cast<const unsigned char*>(text.data()) + pos, len);
}

bool is_word_char(uint32_t cp) { return char_class(cp) & kWordChar; }
bool is_space_char(uint32_t cp) { return char_class(cp) & kWhitespace; }

}  // namespace

void AddedVocab::split(std::string_view text, bool normalized_set, bool split_special,
                       std::vector<Segment>& out) const {
  const TokenTrie& trie = normalized_set ? normalized_ : raw_;
  const size_t n = text.size();
  if (trie.empty()) {
    if (n > 0) out.push_back(Segment{0, static_cast<uint32_t>(n), -1});
    return;
  }
  size_t start_offset = 0;  // end of the previous accepted segment
  size_t pos = 0;           // where the matcher resumes
  while (pos < n) {
    if (!trie.may_start(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    int32_t index = -1;
    const size_t len = trie.longest_at(text, pos, index);
    if (len == 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + len;
    pos = stop;  // a rejected match is consumed too (Aho-Corasick find_iter semantics)
    if (split_special && tok.special) continue;
    if (tok.single_word) {
      const bool start_ok = start == 0 || !is_word_char(char_before(text, start));
      size_t clen;
      const bool stop_ok = stop == n || !is_word_char(char_at(text, stop, clen));
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t p = s - 1;
        while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        size_t clen;
        if (!is_space_char(char_at(text, p, clen))) break;
        s = p;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (stop < n) {
        size_t clen;
        if (!is_space_char(char_at(text, stop, clen))) break;
        stop += clen;
      }
    }
    if (start_offset < start)
      out.push_back(Segment{static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start), -1});
    out.push_back(Segment{static_cast<uint32_t>(start), static_cast<uint32_t>(stop), tok.id});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < n) out.push_back(Segment{static_cast<uint32_t>(start_offset), static_cast<uint32_t>(n), -1});
}

}  // namespace specserve::tokenizer
