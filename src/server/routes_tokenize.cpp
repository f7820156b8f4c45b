// POST /tokenize and POST /detokenize (vLLM's field names; llama.cpp's "content" accepted too).
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "server/json_fields.h"
#include "server/openai_request.h"
#include "server/routes.h"

namespace specserve::server {

void register_tokenize_routes(Router& router, RouteContext& ctx) {
  // {"prompt": "text", "add_special_tokens": true} or {"messages": [...]} (rendered with the chat
  // template, as /v1/chat/completions would) → {"tokens": [...], "count": n, "max_model_len": c}
  router.add({"POST", "/tokenize", false, false, [&ctx](const HttpRequest& req) {
                return guarded([&]() -> RouteResult {
                  auto model = require_model(ctx);
                  nlohmann::json body = parse_json_body(req.body);
                  require_object(body, "the request body");
                  JsonFields f(body);
                  check_model_name(f.string("model").value_or(""), *model);
                  std::vector<int32_t> tokens;
                  if (f.has("messages")) {
                    RequestLimits limits;
                    limits.vocab_size = model->info().vocab_size;
                    ChatRequest chat = parse_chat_request(body, limits);
                    tokens = model->encode(model->render_chat(chat).text, false);
                  } else {
                    auto text = f.string("prompt");
                    if (!text) text = f.string("content");
                    if (!text) throw_bad_param("prompt", "'prompt' (a string) or 'messages' is required");
                    tokens = model->encode(*text, f.boolean("add_special_tokens").value_or(true));
                  }
                  return json_response(
                      200,
                      {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", model->info().context_length}});
                });
              }});

  // {"tokens": [...]} → {"prompt": "text"}
  router.add({"POST", "/detokenize", false, false, [&ctx](const HttpRequest& req) {
                return guarded([&]() -> RouteResult {
                  auto model = require_model(ctx);
                  nlohmann::json body = parse_json_body(req.body);
                  require_object(body, "the request body");
                  JsonFields f(body);
                  check_model_name(f.string("model").value_or(""), *model);
                  const nlohmann::json* arr = f.array("tokens");
                  if (!arr) throw_bad_param("tokens", "'tokens' (an array of token ids) is required");
                  std::vector<int32_t> tokens;
                  const int64_t vocab = model->info().vocab_size;
                  for (const auto& t : *arr) {
                    if (!t.is_number_integer()) throw_bad_param("tokens", "'tokens' must hold integers");
                    int64_t id = t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX ? -1 : t.get<int64_t>();
                    if (id < 0 || id >= vocab)
                      throw_bad_param("tokens", fmt::format("token id {} is out of range [0, {})", id, vocab));
                    tokens.push_back(static_cast<int32_t>(id));
                  }
                  std::string text = model->decode(tokens);
                  return json_response(200, {{"prompt", text}});
                });
              }});
}

}  // namespace specserve::server
