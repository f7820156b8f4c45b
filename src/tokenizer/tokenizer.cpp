#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocab added;
  std::vector<std::string> token_bytes;  // per id: decoder bytes (HF ByteLevel decoder rule)
  std::vector<uint8_t> kind;             // per id: 0 unknown, 1 vocab, 2 added, 3 added special
  bool split_special_default = false;

  void encode_text(std::string_view piece, std::vector<int32_t>& out, bool split_special) const;
};

namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  SS_CHECK(in.good(), "cannot open {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

bool decoder_is_byte_level(const nlohmann::json& d) {
  if (d.is_null()) return false;
  const std::string type = d.value("type", std::string());
  if (type == "ByteLevel") return true;
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array()) {
    for (const auto& x : d["decoders"]) {
      if (!decoder_is_byte_level(x)) return false;
    }
    return !d["decoders"].empty();
  }
  return false;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::load(const std::filesystem::path& path, const LoadOptions& options) {
  std::filesystem::path file = path;
  std::filesystem::path config;
  if (std::filesystem::is_directory(path)) {
    file = path / "tokenizer.json";
    config = path / "tokenizer_config.json";
  } else {
    config = path.parent_path() / "tokenizer_config.json";
  }
  SS_CHECK(std::filesystem::exists(file), "tokenizer: {} does not exist", file.string());
  return with_context("loading " + file.string(), [&] {
    const nlohmann::json tj = read_json(file);
    if (std::filesystem::exists(config)) {
      const nlohmann::json cj = read_json(config);
      return from_json(tj, &cj, options);
    }
    return from_json(tj, nullptr, options);
  });
}

Tokenizer Tokenizer::from_json(const nlohmann::json& tj, const nlohmann::json* config, const LoadOptions& options) {
  try {
    return build(tj, config, options);
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer.json has an unexpected structure: {}", e.what());
  }
}

Tokenizer Tokenizer::build(const nlohmann::json& tj, const nlohmann::json* config, const LoadOptions& options) {
  SS_CHECK(tj.is_object(), "tokenizer.json must be a JSON object");
  Tokenizer t;
  t.impl_ = std::make_unique<Impl>();
  Impl& m = *t.impl_;
  m.normalizer = Normalizer::from_json(tj.value("normalizer", nlohmann::json()));
  m.pre_tokenizer = PreTokenizer::from_json(tj.value("pre_tokenizer", nlohmann::json()), options.fast_splitter);
  SS_CHECK(tj.contains("model"), "tokenizer.json has no \"model\"");
  m.model = BpeModel::from_json(tj["model"]);
  SS_CHECK(m.pre_tokenizer.has_byte_level() || decoder_is_byte_level(tj.value("decoder", nlohmann::json())),
           "only byte-level BPE tokenizers are supported (no ByteLevel pre-tokenizer or decoder)");
  const auto decoder = tj.value("decoder", nlohmann::json());
  SS_CHECK(decoder.is_null() || decoder_is_byte_level(decoder), "decoder type '{}' is not supported (only ByteLevel)",
           decoder.value("type", std::string("?")));

  std::vector<AddedToken> added;
  if (tj.contains("added_tokens") && !tj["added_tokens"].is_null()) {
    SS_CHECK(tj["added_tokens"].is_array(), "tokenizer.json: added_tokens must be an array");
    for (const auto& a : tj["added_tokens"]) {
      AddedToken tok;
      SS_CHECK(a.contains("id") && a["id"].is_number_integer() && a.contains("content") && a["content"].is_string(),
               "tokenizer.json: an added token lacks an integer id or a string content");
      const auto id = a["id"].get<int64_t>();
      SS_CHECK(id >= 0 && id < (int64_t{1} << 30), "tokenizer.json: added token id {} is out of range", id);
      tok.id = static_cast<int32_t>(id);
      tok.content = a["content"].get<std::string>();
      SS_CHECK(is_valid_utf8(tok.content), "tokenizer.json: added token {} is not valid UTF-8", id);
      tok.single_word = a.value("single_word", false);
      tok.lstrip = a.value("lstrip", false);
      tok.rstrip = a.value("rstrip", false);
      tok.normalized = a.value("normalized", !a.value("special", false));
      tok.special = a.value("special", false);
      added.push_back(std::move(tok));
    }
  }
  const Normalizer* norm = &m.normalizer;
  m.added.build(added, [norm](const std::string& s) { return norm->apply(s); });

  int32_t limit = m.model.max_id() + 1;
  for (const auto& a : m.added.tokens()) limit = std::max(limit, a.id + 1);
  m.token_bytes.assign(static_cast<size_t>(limit), std::string());
  m.kind.assign(static_cast<size_t>(limit), 0);
  const auto& bl = ByteLevelMap::get();
  for (int32_t id = 0; id <= m.model.max_id(); ++id) {
    if (const std::string* tok = m.model.id_to_token(id)) {
      m.token_bytes[static_cast<size_t>(id)] = bl.decoder_bytes(*tok);
      m.kind[static_cast<size_t>(id)] = 1;
    }
  }
  for (const auto& a : m.added.tokens()) {
    m.token_bytes[static_cast<size_t>(a.id)] = bl.decoder_bytes(a.content);
    m.kind[static_cast<size_t>(a.id)] = a.special ? 3 : 2;
  }
  if (config && config->is_object() && config->contains("split_special_tokens") &&
      (*config)["split_special_tokens"].is_boolean()) {
    m.split_special_default = (*config)["split_special_tokens"].get<bool>();
  }
  return t;
}

void Tokenizer::Impl::encode_text(std::string_view piece, std::vector<int32_t>& out, bool split_special) const {
  // Normalise, then match the normalized added tokens, then pre-tokenize and BPE each word.
  std::string normalized = normalizer.empty() ? std::string(piece) : normalizer.apply(piece);
  std::vector<Segment> segments;
  added.split(normalized, /*normalized_set=*/true, split_special, segments);
  std::vector<Span> words;
  for (const Segment& seg : segments) {
    if (seg.token >= 0) {
      out.push_back(seg.token);
      continue;
    }
    std::string text = normalized.substr(seg.begin, seg.end - seg.begin);
    pre_tokenizer.split(text, words);
    for (const Span w : words) model.encode_word(std::string_view(text).substr(w.begin, w.end - w.begin), out);
  }
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out, const EncodeOptions& options) const {
  SS_CHECK(impl_ != nullptr, "tokenizer is not loaded");
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  const bool split_special = options.split_special_tokens.value_or(impl_->split_special_default);
  std::vector<Segment> segments;
  impl_->added.split(text, /*normalized_set=*/false, split_special, segments);
  for (const Segment& seg : segments) {
    if (seg.token >= 0) {
      out.push_back(seg.token);
    } else {
      impl_->encode_text(text.substr(seg.begin, seg.end - seg.begin), out, split_special);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  encode(text, ids, options);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  SS_CHECK(impl_ != nullptr, "tokenizer is not loaded");
  std::string bytes;
  for (const int32_t id : ids) {
    if (!is_known(id)) continue;
    if (skip_special_tokens && impl_->kind[static_cast<size_t>(id)] == 3) continue;
    bytes += impl_->token_bytes[static_cast<size_t>(id)];
  }
  return is_valid_utf8(bytes) ? bytes : repair_utf8(bytes);
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (!is_known(id)) return {};
  return impl_->token_bytes[static_cast<size_t>(id)];
}

bool Tokenizer::is_known(int32_t id) const {
  return impl_ && id >= 0 && static_cast<size_t>(id) < impl_->kind.size() && impl_->kind[static_cast<size_t>(id)] != 0;
}

bool Tokenizer::is_special(int32_t id) const { return is_known(id) && impl_->kind[static_cast<size_t>(id)] == 3; }

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (!is_known(id)) return std::nullopt;
  for (const auto& a : impl_->added.tokens()) {
    if (a.id == id) return a.content;
  }
  if (const std::string* t = impl_->model.id_to_token(id)) return *t;
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& a : impl_->added.tokens()) {
    if (a.content == token) return a.id;
  }
  return impl_->model.token_to_id(token);
}

int32_t Tokenizer::id_limit() const { return impl_ ? static_cast<int32_t>(impl_->kind.size()) : 0; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added.tokens(); }
bool Tokenizer::split_special_tokens_default() const { return impl_->split_special_default; }

std::string Tokenizer::describe() const {
  return "BPE vocab " + std::to_string(impl_->model.vocab_size()) + ", merges " +
         std::to_string(impl_->model.merge_count()) + ", added " + std::to_string(impl_->added.tokens().size()) +
         ", pre-tokenizer " + impl_->pre_tokenizer.describe();
}

}  // namespace specserve::tokenizer
