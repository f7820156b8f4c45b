// libFuzzer target: the tokenizer on arbitrary bytes (invalid UTF-8, control characters, huge
// repeats). Checks, besides "no crash / no sanitizer report / no hang":
//  - the hand-written Qwen2, Qwen3.5 and GPT-2 scanners split exactly like PCRE2;
//  - byte-level BPE is lossless: decode(encode(x)) == NFC(x with invalid UTF-8 repaired);
//  - the streaming decoder's output concatenates to decode(ids) for arbitrary id sequences.
// The tokenizer is the GPT-2-style fixture (tests/fixtures/tokenizer/gpt2_style) with its
// pre-tokenizer swapped per mode, so no download is needed.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "core/error.h"
#include "tokenizer/split_matcher.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace {

using namespace specserve::tokenizer;

nlohmann::json load_fixture() {
  const auto path = std::filesystem::path(__FILE__).parent_path().parent_path() /
                    "tests/fixtures/tokenizer/gpt2_style/tokenizer.json";
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fuzz_tokenizer: cannot open %s\n", path.c_str());
    std::abort();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

struct Setup {
  Tokenizer with_added;  // the fixture as is (lstrip / rstrip / single_word / normalized tokens)
  Tokenizer qwen_regex;  // no added tokens, NFC, the Qwen regex: lossless round trip
  Tokenizer qwen35_regex;
  std::unique_ptr<SplitMatcher> fast[3], pcre[3];

  Setup() {
    const nlohmann::json base = load_fixture();
    with_added = Tokenizer::from_json(base);
    auto variant = [&](const char* pattern) {
      nlohmann::json t = base;
      t["added_tokens"] = nlohmann::json::array();
      t["pre_tokenizer"] = {
          {"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
      return Tokenizer::from_json(t);
    };
    qwen_regex = variant(kQwen2Pattern);
    qwen35_regex = variant(kQwen35Pattern);
    const FastPattern kinds[3] = {FastPattern::Qwen2, FastPattern::Qwen35, FastPattern::Gpt2};
    const char* pats[3] = {kQwen2Pattern, kQwen35Pattern, kGpt2Pattern};
    for (int i = 0; i < 3; ++i) {
      fast[i] = make_fast_matcher(kinds[i]);
      pcre[i] = make_pcre2_matcher(pats[i]);
    }
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

// The scanners classify code points with utf8proc's tables (Unicode 15), PCRE2 with its own
// (Debian 12's 10.42: Unicode 14), so code points assigned in between (e.g. CJK Extension H,
// U+31350..) are letters for one and not the other and split differently for that reason alone.
// The scanner comparison is made only on text whose code points both classify alike (\p{L},
// \p{N}, \p{M}); HF tokenizers, the reference, is tested against on the real corpora.
bool tables_agree(const std::string& text) {
  static const std::unique_ptr<SplitMatcher> classes[3] = {make_pcre2_matcher("\\p{L}"), make_pcre2_matcher("\\p{N}"),
                                                           make_pcre2_matcher("\\p{M}")};
  static const uint8_t bits[3] = {kLetter, kNumber, kMark};
  std::vector<Span> m;
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    bool ok = false;
    const uint32_t cp = decode_utf8(text, i, len, ok);
    if (cp >= 0x80) {
      const std::string one = text.substr(i, len);
      for (int c = 0; c < 3; ++c) {
        m.clear();
        classes[c]->find_matches(one, m);
        if ((m.size() == 1) != ((char_class(cp) & bits[c]) != 0)) return false;
      }
    }
    i += len;
  }
  return true;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_tokenizer: invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Setup& s = setup();
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 4;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (mode == 0 || mode == 1) {
      const std::string text = repair_utf8(input);
      // Scanners vs PCRE2 (on shorter inputs: PCRE2's backtracking is the slow part here).
      if (text.size() <= 4096 && tables_agree(text)) {
        for (int i = 0; i < 3; ++i) {
          std::vector<Span> a, b;
          s.fast[i]->find_matches(text, a);
          s.pcre[i]->find_matches(text, b);
          bool same = a.size() == b.size();
          for (size_t k = 0; same && k < a.size(); ++k) same = a[k].begin == b[k].begin && a[k].end == b[k].end;
          check(same, "fast scanner != PCRE2");
        }
      }
      const Tokenizer& tok = mode == 0 ? s.qwen_regex : s.qwen35_regex;
      const auto ids = tok.encode(input);
      check(tok.decode(ids) == normalize(text, NormalForm::NFC), "decode(encode(x)) != NFC(x)");
    } else if (mode == 2) {
      const auto ids = s.with_added.encode(input);
      (void)s.with_added.decode(ids, true);
      (void)s.with_added.encode(input, EncodeOptions{true});
    } else {
      // Bytes as ids (little-endian 16-bit, some beyond the vocabulary).
      std::vector<int32_t> ids;
      for (size_t i = 0; i + 1 < input.size(); i += 2) {
        ids.push_back(static_cast<int32_t>(static_cast<uint8_t>(input[i]) | (static_cast<uint8_t>(input[i + 1]) << 8)) %
                          2000 -
                      10);
      }
      const std::string all = s.qwen_regex.decode(ids);
      check(is_valid_utf8(all), "decode produced invalid UTF-8");
      StreamDecoder stream(s.qwen_regex);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      check(streamed == all, "streamed decode != decode");
    }
  } catch (const specserve::Error&) {
    // A clear error is an acceptable outcome; crashes and hangs are not.
  }
  return 0;
}
