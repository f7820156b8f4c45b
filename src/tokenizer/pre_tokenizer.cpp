#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"

namespace specserve::tokenizer {

struct PreTokenizer::Step {
  enum class Kind { Split, ByteLevel } kind = Kind::Split;
  std::unique_ptr<SplitMatcher> matcher;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool add_prefix_space = false;
  bool use_regex = false;
};

namespace {

SplitBehavior parse_behavior(const std::string& s) {
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  fail("Split behavior '{}' is not supported", s);
}

struct Piece {
  Span span;
  bool is_match;
};

// HF NormalizedString::split: the matches and the gaps between them cover the piece; then the
// behaviour decides which become words and which are merged or removed.
void split_piece(const SplitMatcher& matcher, SplitBehavior behavior, bool invert, std::string_view text, Span piece,
                 std::vector<Span>& out, std::vector<Span>& matches, std::vector<Piece>& pieces) {
  matches.clear();
  pieces.clear();
  const std::string_view sub = text.substr(piece.begin, piece.end - piece.begin);
  matcher.find_matches(sub, matches);
  uint32_t prev = 0;
  for (const Span m : matches) {
    if (prev != m.begin) pieces.push_back(Piece{Span{prev, m.begin}, false});
    pieces.push_back(Piece{m, true});
    prev = m.end;
  }
  if (prev != sub.size()) pieces.push_back(Piece{Span{prev, static_cast<uint32_t>(sub.size())}, false});
  if (invert) {
    for (auto& p : pieces) p.is_match = !p.is_match;
  }

  std::vector<Piece> merged;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (auto& p : pieces) p.is_match = false;
      merged = std::move(pieces);
      break;
    case SplitBehavior::Removed: merged = std::move(pieces); break;
    case SplitBehavior::Contiguous: {
      bool previous_match = false;
      for (const Piece& p : pieces) {
        if (p.is_match == previous_match && !merged.empty()) {
          merged.back().span.end = p.span.end;
        } else {
          merged.push_back(Piece{p.span, false});
        }
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const Piece& p : pieces) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().span.end = p.span.end;
        } else {
          merged.push_back(Piece{p.span, false});
        }
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previous_match = false;
      for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().span.begin = it->span.begin;
        } else {
          merged.push_back(Piece{it->span, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
  }
  for (const Piece& p : merged) {
    if (p.is_match || p.span.end == p.span.begin) continue;  // removed, or empty
    out.push_back(Span{piece.begin + p.span.begin, piece.begin + p.span.end});
  }
}

void collect(const nlohmann::json& j, bool allow_fast, std::vector<std::unique_ptr<PreTokenizer::Step>>& steps) {
  if (j.is_null()) return;
  SS_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
           "pre_tokenizer: expected an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "Sequence") {
    SS_CHECK(j.contains("pretokenizers") && j["pretokenizers"].is_array(),
             "pre_tokenizer Sequence: missing \"pretokenizers\"");
    for (const auto& p : j["pretokenizers"]) collect(p, allow_fast, steps);
    return;
  }
  auto step = std::make_unique<PreTokenizer::Step>();
  if (type == "Split") {
    step->kind = PreTokenizer::Step::Kind::Split;
    SS_CHECK(j.contains("pattern") && j["pattern"].is_object(), "pre_tokenizer Split: missing \"pattern\"");
    const auto& pat = j["pattern"];
    if (pat.contains("Regex")) {
      step->matcher = make_regex_matcher(pat["Regex"].get<std::string>(), allow_fast);
    } else if (pat.contains("String")) {
      step->matcher = make_literal_matcher(pat["String"].get<std::string>());
    } else {
      fail("pre_tokenizer Split: pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}");
    }
    step->behavior = parse_behavior(j.value("behavior", std::string("Isolated")));
    step->invert = j.value("invert", false);
  } else if (type == "ByteLevel") {
    step->kind = PreTokenizer::Step::Kind::ByteLevel;
    step->add_prefix_space = j.value("add_prefix_space", true);
    step->use_regex = j.value("use_regex", true);
    if (step->use_regex) step->matcher = make_regex_matcher(kGpt2Pattern, allow_fast);
  } else {
    fail("pre_tokenizer type '{}' is not supported (supported: Split, ByteLevel, Sequence)", type);
  }
  steps.push_back(std::move(step));
}

}  // namespace

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, bool allow_fast) {
  PreTokenizer p;
  collect(j, allow_fast, p.steps_);
  return p;
}

bool PreTokenizer::has_byte_level() const {
  for (const auto& s : steps_) {
    if (s->kind == Step::Kind::ByteLevel) return true;
  }
  return false;
}

std::string PreTokenizer::describe() const {
  std::string d;
  for (const auto& s : steps_) {
    if (!d.empty()) d += " -> ";
    if (s->kind == Step::Kind::ByteLevel) {
      d += "ByteLevel";
      if (s->add_prefix_space) d += "(prefix space)";
      if (s->matcher) d += "[" + s->matcher->describe() + "]";
    } else {
      d += "Split[" + s->matcher->describe() + "]";
    }
  }
  return d.empty() ? "none" : d;
}

void PreTokenizer::split(std::string& text, std::vector<Span>& words) const {
  words.clear();
  if (text.empty()) return;
  words.push_back(Span{0, static_cast<uint32_t>(text.size())});
  std::vector<Span> next, matches;
  std::vector<Piece> pieces;
  for (const auto& step : steps_) {
    if (step->kind == Step::Kind::ByteLevel && step->add_prefix_space) {
      bool needed = false;
      for (const Span w : words) needed |= text[w.begin] != ' ';
      if (needed) {
        std::string rebuilt;
        rebuilt.reserve(text.size() + words.size());
        next.clear();
        for (const Span w : words) {
          const auto begin = static_cast<uint32_t>(rebuilt.size());
          if (text[w.begin] != ' ') rebuilt.push_back(' ');
          rebuilt.append(text, w.begin, w.end - w.begin);
          next.push_back(Span{begin, static_cast<uint32_t>(rebuilt.size())});
        }
        text.swap(rebuilt);
        words.swap(next);
      }
    }
    if (!step->matcher) continue;
    next.clear();
    for (const Span w : words) {
      split_piece(*step->matcher, step->kind == Step::Kind::ByteLevel ? SplitBehavior::Isolated : step->behavior,
                  step->kind == Step::Kind::ByteLevel ? false : step->invert, text, w, next, matches, pieces);
    }
    words.swap(next);
  }
}

}  // namespace specserve::tokenizer
