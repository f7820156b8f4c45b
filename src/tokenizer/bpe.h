#pragma once
// Byte-level BPE model (tokenizer.json "model" of type BPE): vocab, merges in both the "a b" and
// the ["a", "b"] forms, ignore_merges, and the merge loop of Hugging Face (repeatedly merge the
// adjacent pair of lowest rank, leftmost first). Words are raw bytes; vocab entries are decoded
// from their byte-level spelling ("Ġhi" -> " hi") at load time.
//
// Cost: a small word is merged by scanning its pairs (cheap for the common case); a long word
// (pathological input such as 100k repeated characters) goes through a priority queue over a
// linked list of symbols, O(n log n). Results for words up to kCacheMaxWordBytes are cached.
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specserve::tokenizer {

class BpeModel {
 public:
  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  static BpeModel from_json(const nlohmann::json& model);

  // Appends the ids of one pre-token (raw bytes).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // Vocabulary (model part only; added tokens live in the tokenizer).
  std::optional<int32_t> token_to_id(std::string_view byte_level_token) const;
  const std::string* id_to_token(int32_t id) const;  // byte-level spelling
  int32_t max_id() const { return max_id_; }
  size_t vocab_size() const { return vocab_.size(); }
  size_t merge_count() const { return merge_count_; }

  static constexpr size_t kCacheMaxWordBytes = 256;

 private:
  struct MergeTable;
  struct Cache;

  void merge_small(std::vector<int32_t>& symbols) const;
  void merge_large(std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;        // byte-level spelling -> id
  std::unordered_map<std::string, int32_t> vocab_bytes_;  // raw bytes -> id (ignore_merges)
  std::vector<const std::string*> id_to_token_;           // into vocab_ keys
  std::array<int32_t, 256> byte_id_{};                    // initial symbol per byte, -1 if absent
  std::unique_ptr<MergeTable> merges_;
  std::unique_ptr<Cache> cache_;
  size_t merge_count_ = 0;
  int32_t max_id_ = -1;
  bool ignore_merges_ = false;
};

}  // namespace specserve::tokenizer
