#include "spec/draft_vocabulary.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "io/id_list.h"

namespace specserve::spec {

std::vector<int32_t> draft_vocabulary(const std::string& arg, std::span<const int32_t> always, int64_t vocab) {
  if (arg.empty() || arg == "all") return {};
  std::vector<int32_t> ids;
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), n);
  if (ec == std::errc() && end == arg.data() + arg.size()) {
    SS_CHECK(n >= 1, "--draft-vocab: {} ids is not a vocabulary (at least 1)", n);
    if (n >= vocab) return {};
    ids.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  } else {
    ids = read_id_list(arg);
    SS_CHECK(!ids.empty(), "--draft-vocab: {} lists no ids", arg);
    for (int32_t id : ids)
      SS_CHECK(id < vocab, "--draft-vocab: {} lists id {}, outside the model's vocabulary [0, {})", arg, id, vocab);
  }
  for (int32_t id : always)
    if (id >= 0 && id < vocab) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (static_cast<int64_t>(ids.size()) == vocab) return {};
  return ids;
}

std::vector<int32_t> always_drafted(const tokenizer::Tokenizer* tok, const ModelConfig& config) {
  std::vector<int32_t> ids;
  if (tok != nullptr)
    for (const auto& t : tok->added_tokens()) ids.push_back(t.id);
  for (auto id : config.eos_token_ids) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

}  // namespace specserve::spec
