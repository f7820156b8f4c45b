#include "tokenizer/bpe.h"

#include <nlohmann/json.hpp>

#include <queue>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace specserve::tokenizer {

// Open-addressing map (id_a, id_b) -> (rank, merged id).
struct BpeModel::MergeTable {
  struct Entry {
    uint64_t key = kEmpty;
    uint32_t rank = 0;
    int32_t merged = -1;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  std::vector<Entry> slots;
  uint64_t mask = 0;

  explicit MergeTable(size_t count) {
    size_t cap = 16;
    while (cap < count * 2) cap <<= 1;
    slots.assign(cap, Entry{});
    mask = cap - 1;
  }
  static uint64_t key_of(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  // A later duplicate overwrites an earlier one (as collecting into a HashMap does in HF).
  void put(int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    const uint64_t k = key_of(a, b);
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == k) {
        slots[i] = Entry{k, rank, merged};
        return;
      }
    }
  }
  const Entry* get(int32_t a, int32_t b) const {
    const uint64_t k = key_of(a, b);
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == k) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }
};

// Word -> ids cache, sharded so that concurrent encoders rarely contend.
struct BpeModel::Cache {
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxEntriesPerShard = 1 << 14;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  Shard shards[kShards];
  static size_t shard_of(std::string_view w) { return std::hash<std::string_view>{}(w) % kShards; }
};

BpeModel::BpeModel() = default;
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

BpeModel BpeModel::from_json(const nlohmann::json& model) {
  SS_CHECK(model.is_object(), "tokenizer.json: \"model\" must be an object");
  const std::string type =
      model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "BPE";
  SS_CHECK(type == "BPE", "tokenizer.json: model type '{}' is not supported (only BPE)", type);
  SS_CHECK(!model.contains("dropout") || model["dropout"].is_null(), "tokenizer.json: BPE dropout is not supported");
  auto string_or_empty = [&](const char* key) {
    return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : std::string();
  };
  const std::string prefix = string_or_empty("continuing_subword_prefix");
  const std::string suffix = string_or_empty("end_of_word_suffix");
  SS_CHECK(prefix.empty() && suffix.empty(),
           "tokenizer.json: BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  SS_CHECK(
      !(model.contains("byte_fallback") && model["byte_fallback"].is_boolean() && model["byte_fallback"].get<bool>()),
      "tokenizer.json: BPE byte_fallback is not supported");

  BpeModel m;
  m.ignore_merges_ =
      model.contains("ignore_merges") && model["ignore_merges"].is_boolean() && model["ignore_merges"].get<bool>();
  SS_CHECK(model.contains("vocab") && model["vocab"].is_object(), "tokenizer.json: model.vocab must be an object");
  const auto& bl = ByteLevelMap::get();
  m.vocab_.reserve(model["vocab"].size());
  for (const auto& [token, id_json] : model["vocab"].items()) {
    SS_CHECK(id_json.is_number_integer(), "tokenizer.json: vocab id of '{}' is not an integer", token);
    const auto id = id_json.get<int64_t>();
    SS_CHECK(id >= 0 && id < (int64_t{1} << 30), "tokenizer.json: vocab id {} of '{}' is out of range", id, token);
    m.vocab_[token] = static_cast<int32_t>(id);
    m.max_id_ = std::max(m.max_id_, static_cast<int32_t>(id));
  }
  m.id_to_token_.assign(static_cast<size_t>(m.max_id_ + 1), nullptr);
  for (const auto& [token, id] : m.vocab_) {
    m.id_to_token_[static_cast<size_t>(id)] = &token;
    if (auto bytes = bl.decode_token(token)) m.vocab_bytes_.emplace(std::move(*bytes), id);
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    const uint32_t cp = bl.byte_to_char(static_cast<uint8_t>(b));
    // UTF-8 of the byte char
    if (cp < 0x80) {
      ch.push_back(static_cast<char>(cp));
    } else {
      ch.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      ch.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    auto it = m.vocab_.find(ch);
    m.byte_id_[b] = it == m.vocab_.end() ? -1 : it->second;
  }

  const auto& merges = model.contains("merges") ? model["merges"] : nlohmann::json::array();
  SS_CHECK(merges.is_array(), "tokenizer.json: model.merges must be an array");
  m.merges_ = std::make_unique<MergeTable>(merges.size());
  uint32_t rank = 0;
  for (const auto& merge : merges) {
    std::string a, b;
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const size_t sp = s.find(' ');
      SS_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
               "tokenizer.json: merge '{}' is not of the form \"a b\"", s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      fail("tokenizer.json: merge #{} is neither \"a b\" nor [\"a\", \"b\"]", rank);
    }
    const auto ia = m.vocab_.find(a), ib = m.vocab_.find(b), iab = m.vocab_.find(a + b);
    SS_CHECK(ia != m.vocab_.end() && ib != m.vocab_.end(),
             "tokenizer.json: merge '{} {}' uses a token not in the vocab", a, b);
    SS_CHECK(iab != m.vocab_.end(), "tokenizer.json: merge '{} {}' makes '{}{}', which is not in the vocab", a, b, a,
             b);
    m.merges_->put(ia->second, ib->second, rank, iab->second);
    ++rank;
  }
  m.merge_count_ = rank;
  m.cache_ = std::make_unique<Cache>();
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view byte_level_token) const {
  auto it = vocab_.find(std::string(byte_level_token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  return id_to_token_[static_cast<size_t>(id)];
}

// Repeatedly merges the lowest-rank adjacent pair (leftmost among equals).
void BpeModel::merge_small(std::vector<int32_t>& s) const {
  while (s.size() > 1) {
    uint32_t best_rank = UINT32_MAX;
    size_t best = 0;
    int32_t merged = -1;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (const auto* e = merges_->get(s[i], s[i + 1]); e && e->rank < best_rank) {
        best_rank = e->rank;
        best = i;
        merged = e->merged;
      }
    }
    if (merged < 0) return;
    s[best] = merged;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

// Same result as merge_small, in O(n log n): HF's Word::merge_all (a heap of candidate merges
// keyed by (rank, position) over a doubly linked list, stale entries skipped when popped).
void BpeModel::merge_large(std::vector<int32_t>& s) const {
  const size_t n = s.size();
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
  }
  struct Cand {
    uint32_t rank;
    size_t pos;
    int32_t merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (const auto* e = merges_->get(s[i], s[i + 1])) heap.push(Cand{e->rank, i, e->merged});
  }
  while (!heap.empty()) {
    const Cand top = heap.top();
    heap.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const auto right = static_cast<size_t>(next[top.pos]);
    const auto* e = merges_->get(s[top.pos], s[right]);
    if (!e || e->merged != top.merged) continue;  // stale entry
    s[top.pos] = top.merged;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int64_t>(top.pos);
    if (prev[top.pos] >= 0) {
      const auto p = static_cast<size_t>(prev[top.pos]);
      if (const auto* pe = merges_->get(s[p], s[top.pos])) heap.push(Cand{pe->rank, p, pe->merged});
    }
    if (next[top.pos] >= 0) {
      const auto q = static_cast<size_t>(next[top.pos]);
      if (const auto* qe = merges_->get(s[top.pos], s[q])) heap.push(Cand{qe->rank, top.pos, qe->merged});
    }
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) s[w++] = s[i];
  }
  s.resize(w);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_bytes_.find(std::string(word)); it != vocab_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() == 1) {
    const int32_t id = byte_id_[static_cast<unsigned char>(word[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  Cache::Shard* shard = nullptr;
  if (cacheable) {
    shard = &cache_->shards[Cache::shard_of(word)];
    std::lock_guard<std::mutex> lock(shard->mu);
    if (auto it = shard->map.find(std::string(word)); it != shard->map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  for (unsigned char b : word) {
    if (const int32_t id = byte_id_[b]; id >= 0) symbols.push_back(id);  // HF skips unknown chars
  }
  if (symbols.size() <= 48) {
    merge_small(symbols);
  } else {
    merge_large(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(shard->mu);
    if (shard->map.size() >= Cache::kMaxEntriesPerShard) shard->map.clear();
    shard->map.emplace(std::string(word), std::move(symbols));
  }
}

}  // namespace specserve::tokenizer
