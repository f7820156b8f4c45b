// `specserve tokenize`: token ids of text, or text of token ids, with a tokenizer.json.
//   specserve tokenize --tokenizer PATH --input-jsonl FILE            each line a JSON string -> {"ids":[...]}
//   specserve tokenize --tokenizer PATH --input-jsonl FILE --decode   each line {"ids":[...]} -> {"text":"..."}
// PATH is a tokenizer.json or a directory holding one; FILE may be '-' for stdin. Blank lines are
// skipped; any other line that is not of the expected form is an error (exit 1) naming the line.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace specserve::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string input;
  bool decode = false;
  bool skip_special_tokens = false;
  bool split_special_tokens = false;
};

int run_tokenize(const TokenizeArgs& a) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(a.tokenizer);
  std::ifstream file;
  std::istream* in = &std::cin;
  if (a.input != "-") {
    file.open(a.input, std::ios::binary);
    SS_CHECK(file.good(), "cannot open --input-jsonl {}", a.input);
    in = &file;
  }
  tokenizer::EncodeOptions opts;
  if (a.split_special_tokens) opts.split_special_tokens = true;
  std::string line, out;
  std::vector<int32_t> ids;
  size_t line_no = 0;
  while (std::getline(*in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{} line {}: not JSON: {}", a.input, line_no, e.what());
    }
    if (!a.decode) {
      SS_CHECK(j.is_string(), "{} line {}: expected a JSON string", a.input, line_no);
      ids.clear();
      tok.encode(j.get_ref<const std::string&>(), ids, opts);
      out = "{\"ids\":[";
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(ids[i]);
      }
      out += "]}\n";
    } else {
      SS_CHECK(j.is_object() && j.contains("ids") && j["ids"].is_array(), "{} line {}: expected {{\"ids\": [...]}}",
               a.input, line_no);
      ids.clear();
      for (const auto& x : j["ids"]) {
        SS_CHECK(x.is_number_integer(), "{} line {}: ids must be integers", a.input, line_no);
        const auto v = x.get<int64_t>();
        ids.push_back(v < INT32_MIN || v > INT32_MAX ? -1 : static_cast<int32_t>(v));
      }
      const nlohmann::json o = {{"text", tok.decode(ids, a.skip_special_tokens)}};
      out = o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app, CommandRunner& run) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "Token ids of text (or text of ids) with a Hugging Face tokenizer.json");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json, or a directory holding one")->required();
  cmd->add_option("--input-jsonl", args->input,
                  "input lines: JSON strings (or {\"ids\": [...]} with --decode); '-' = stdin")
      ->required();
  cmd->add_flag("--decode", args->decode, "decode {\"ids\": [...]} lines to {\"text\": ...}");
  cmd->add_flag("--skip-special-tokens", args->skip_special_tokens, "with --decode: drop special tokens");
  cmd->add_flag("--split-special-tokens", args->split_special_tokens,
                "encode special tokens written in the text as plain text (HF split_special_tokens)");
  cmd->callback([args, &run] { run = [args] { return run_tokenize(*args); }; });
}

}  // namespace specserve::cli
