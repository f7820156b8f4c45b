#include "tiny_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"

namespace specserve::tiny {

namespace {

// What the merges are learned on: a little Python, C and prose, so that common code fragments
// ("def", "return", "    ") become tokens as they would in a real code tokenizer.
constexpr const char* kTrainingText = R"(def fib(n):
    """Return the n-th Fibonacci number."""
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def main():
    for i in range(10):
        print(i, fib(i))


if __name__ == "__main__":
    main()

int add(int a, int b) {
    return a + b;
}

int main(void) {
    int total = 0;
    for (int i = 0; i < 10; i++) {
        total = add(total, i);
    }
    printf("%d\n", total);
    return 0;
}

The quick brown fox jumps over the lazy dog. A function returns a value; a loop repeats
its body while the condition holds. Write the code, then write the tests, then run the tests.
class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        return self.items.pop()

    def is_empty(self):
        return len(self.items) == 0


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def sort_numbers(numbers):
    result = list(numbers)
    for i in range(len(result)):
        for j in range(i + 1, len(result)):
            if result[j] < result[i]:
                result[i], result[j] = result[j], result[i]
    return result

function greet(name) {
  const message = `Hello, ${name}!`;
  console.log(message);
  return message;
}

const numbers = [1, 2, 3, 4, 5];
const squares = numbers.map((x) => x * x);
console.log(squares.filter((x) => x % 2 === 0));

for file in *.txt; do
  echo "processing $file"
  wc -l "$file"
done

A test checks that the function returns the expected value for each input. When a test fails,
read the error message, find the line that raised it, and fix the code before you run the tests
again. Good names, small functions and clear comments make the code easier to read and to change.
)";

// The Qwen2/Qwen3 pre-tokenizer regex (docs/MODELS.md §4.1), so the project's tokenizer meets the real one.
constexpr const char* kQwenSplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool is_printable_latin1(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

enum class CharClass { Letter, Digit, Space, Newline, Other };
CharClass classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::Letter;
  if (c >= '0' && c <= '9') return CharClass::Digit;
  if (c == '\n' || c == '\r') return CharClass::Newline;
  if (c == ' ' || c == '\t') return CharClass::Space;
  return CharClass::Other;
}

// A rough GPT-2-style word split for training only: runs of one character class, with a single
// space joining the word after it ("Ġreturn"). Merges that would cross the real regex's boundaries
// are harmless: they never apply.
std::vector<std::string> training_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && classify(text[i + 1]) != CharClass::Space &&
        classify(text[i + 1]) != CharClass::Newline)
      ++i;  // the space belongs to the next word
    CharClass cls = classify(text[i]);
    while (i < text.size() && classify(text[i]) == cls) ++i;
    words.push_back(text.substr(start, i - start));
  }
  return words;
}

}  // namespace

std::vector<uint8_t> gpt2_byte_order() {
  std::vector<uint8_t> order;
  for (int b = 0; b < 256; ++b)
    if (is_printable_latin1(b)) order.push_back(static_cast<uint8_t>(b));
  for (int b = 0; b < 256; ++b)
    if (!is_printable_latin1(b)) order.push_back(static_cast<uint8_t>(b));
  return order;
}

std::string gpt2_byte_symbol(uint8_t byte) {
  if (is_printable_latin1(byte)) return utf8(byte);
  int n = 0;  // position among the non-printable bytes, mapped to U+0100 onwards
  for (int b = 0; b < byte; ++b)
    if (!is_printable_latin1(b)) ++n;
  return utf8(256 + n);
}

int64_t TinyTokenizer::special_id(const std::string& token) const {
  auto it = std::find(special_tokens.begin(), special_tokens.end(), token);
  SS_CHECK(it != special_tokens.end(), "tiny tokenizer: no special token {}", token);
  return static_cast<int64_t>(vocab.size() + (it - special_tokens.begin()));
}

TinyTokenizer build_tiny_tokenizer(int max_merges) {
  TinyTokenizer t;
  std::set<std::string> known;
  for (uint8_t b : gpt2_byte_order()) {
    t.vocab.push_back(gpt2_byte_symbol(b));
    known.insert(t.vocab.back());
  }
  std::map<std::vector<std::string>, int> words;  // word as symbols -> count
  for (const auto& w : training_words(kTrainingText)) {
    std::vector<std::string> symbols;
    for (unsigned char c : w) symbols.push_back(gpt2_byte_symbol(c));
    ++words[symbols];
  }
  for (int m = 0; m < max_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;  // ordered: ties go to the smallest pair
    for (const auto& [symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += count;
    auto best = pairs.end();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (best == pairs.end() || it->second > best->second) best = it;
    if (best == pairs.end() || best->second < 2) break;
    const auto [a, b] = best->first;
    t.merges.push_back(a + " " + b);
    if (known.insert(a + b).second) t.vocab.push_back(a + b);
    std::map<std::vector<std::string>, int> merged;
    for (const auto& [symbols, count] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
          out.push_back(a + b);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      merged[out] += count;
    }
    words = std::move(merged);
  }
  t.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  return t;
}

std::string tokenizer_json(const TinyTokenizer& t) {
  using ojson = nlohmann::ordered_json;
  ojson added = ojson::array();
  for (const auto& s : t.special_tokens)
    added.push_back({{"id", t.special_id(s)},
                     {"content", s},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  ojson vocab = ojson::object();
  for (size_t id = 0; id < t.vocab.size(); ++id) vocab[t.vocab[id]] = id;
  const ojson byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ojson j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kQwenSplitRegex}}}, {"behavior", "Isolated"}, {"invert", false}},
          byte_level}}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", t.merges}}},
  };
  return j.dump(2) + "\n";
}

std::string tokenizer_config_json(const TinyTokenizer& t) {
  using ojson = nlohmann::ordered_json;
  ojson decoder = ojson::object();
  for (const auto& s : t.special_tokens)
    decoder[std::to_string(t.special_id(s))] = {{"content", s},    {"lstrip", false},      {"normalized", false},
                                                {"rstrip", false}, {"single_word", false}, {"special", true}};
  // ChatML, the format of every Qwen chat model (docs/MODELS.md §4.4), without tools or thinking.
  const std::string chat_template =
      "{%- for message in messages %}"
      "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
      "{%- endfor %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  ojson j = {{"add_bos_token", false},
             {"add_prefix_space", false},
             {"added_tokens_decoder", decoder},
             {"additional_special_tokens", {"<|im_start|>", "<|im_end|>"}},
             {"bos_token", nullptr},
             {"chat_template", chat_template},
             {"clean_up_tokenization_spaces", false},
             {"eos_token", "<|im_end|>"},
             {"errors", "replace"},
             {"model_max_length", 32768},
             {"pad_token", "<|endoftext|>"},
             {"split_special_tokens", false},
             {"tokenizer_class", "Qwen2Tokenizer"},
             {"unk_token", nullptr}};
  return j.dump(2) + "\n";
}

}  // namespace specserve::tiny
