// `specserve chat-template`: renders a chat request with the checkpoint's chat template, exactly as
// transformers' apply_chat_template would.
//   specserve chat-template --tokenizer DIR --request-file FILE [--json]
// FILE ('-' = stdin) holds {"messages": [...], "tools"?: [...], "add_generation_prompt"?: bool,
// "enable_thinking"?: bool, ... other template kwargs}. Prints the prompt as is (no newline
// added), or {"text": ...} and a newline with --json. Template errors exit 1 with the message.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "core/error.h"

namespace specserve::cli {

namespace {

struct ChatTemplateArgs {
  std::string tokenizer;
  std::string request_file;
  bool json = false;
};

int run_chat_template(const ChatTemplateArgs& a) {
  const chat::ChatTemplate tmpl = chat::ChatTemplate::load(a.tokenizer);
  std::stringstream ss;
  if (a.request_file == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(a.request_file, std::ios::binary);
    SS_CHECK(in.good(), "cannot open --request-file {}", a.request_file);
    ss << in.rdbuf();
  }
  const std::string text = tmpl.render_json(ss.str());
  if (a.json) {
    const std::string out =
        nlohmann::json({{"text", text}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void register_chat_template(CLI::App& app, CommandRunner& run) {
  auto args = std::make_shared<ChatTemplateArgs>();
  auto* cmd = app.add_subcommand("chat-template", "Render a chat request with the checkpoint's chat template");
  cmd->add_option("--tokenizer", args->tokenizer, "directory with chat_template.jinja or tokenizer_config.json")
      ->required();
  cmd->add_option("--request-file", args->request_file,
                  "JSON request: messages, tools, add_generation_prompt, kwargs; '-' = stdin")
      ->required();
  cmd->add_flag("--json", args->json, "print {\"text\": ...} instead of the raw prompt");
  cmd->callback([args, &run] { run = [args] { return run_chat_template(*args); }; });
}

}  // namespace specserve::cli
