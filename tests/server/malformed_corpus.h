#pragma once
// A corpus of malformed requests to the OpenAI endpoints: bad JSON, truncated bodies, invalid
// UTF-8, wrong types for every known field (alone and mixed with unknown fields), out-of-range
// numbers, unknown model, oversize prompts, bad max_tokens, bad logit_bias ids. Every one must get
// a 4xx with an OpenAI-shaped error body while the server keeps serving valid requests.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace specserve::test {

struct BadRequest {
  std::string path;
  std::string body;
  std::string what;  // for failure messages
};

inline std::vector<BadRequest> malformed_requests(const std::string& model, int64_t vocab_size,
                                                  int64_t context_length) {
  using nlohmann::json;
  std::vector<BadRequest> out;
  const json chat = {{"model", model}, {"messages", {{{"role", "user"}, {"content", "Say hello"}}}}, {"max_tokens", 4}};
  const json completion = {{"model", model}, {"prompt", "Say hello"}, {"max_tokens", 4}};
  auto add = [&](const std::string& path, const std::string& body, const std::string& what) {
    out.push_back({path, body, what});
  };
  auto with = [](json base, const std::string& key, const json& value) {
    base[key] = value;
    return base;
  };

  // 1. Bad JSON and truncated bodies: every prefix of a valid body (cut every 3 bytes).
  const std::string chat_text = chat.dump();
  for (size_t cut = 0; cut + 1 < chat_text.size(); cut += 3) {
    add("/v1/chat/completions", chat_text.substr(0, cut), "chat body truncated at " + std::to_string(cut));
  }
  const std::string completion_text = completion.dump();
  for (size_t cut = 1; cut + 1 < completion_text.size(); cut += 5) {
    add("/v1/completions", completion_text.substr(0, cut), "completion body truncated at " + std::to_string(cut));
  }
  for (const char* garbage :
       {"not json", "{'single': 'quotes'}", "{\"a\":1,}", "[1,2", "{\"messages\": [}", "nul", "{\"model\" \"x\"}",
        "\x01\x02\x03", "{}{}", "{\"a\": 01}", "{\"a\": NaN}", "{\"a\": .5}"}) {
    add("/v1/chat/completions", garbage, std::string("garbage: ") + garbage);
    add("/v1/completions", garbage, std::string("garbage: ") + garbage);
  }
  add("/v1/chat/completions", std::string(200, '['), "deeply nested arrays");
  add("/v1/chat/completions", std::string(200, '{'), "deeply nested objects");
  // Bodies that are JSON but not objects.
  for (const char* v : {"[]", "[1,2,3]", "\"text\"", "42", "true", "null"}) {
    add("/v1/chat/completions", v, std::string("non-object body ") + v);
    add("/v1/completions", v, std::string("non-object body ") + v);
  }

  // 2. Invalid UTF-8 inside strings.
  for (const char* bad :
       {"\xff", "\xc3", "\xc3\x28", "\xe2\x82", "\xed\xa0\x80", "\xf8\x88\x80\x80\x80", "\xc0\xaf", "a\x80z"}) {
    std::string text = chat_text;
    text.replace(text.find("Say hello"), 9, std::string("Say ") + bad);
    add("/v1/chat/completions", text, "invalid UTF-8 in content");
    std::string ctext = completion_text;
    ctext.replace(ctext.find("Say hello"), 9, bad);
    add("/v1/completions", ctext, "invalid UTF-8 in prompt");
  }

  // 3. Known fields with the wrong type (each alone, then with unknown fields around it).
  const json not_string = 17, not_number = "1", not_bool = "true", not_object = json::array({1}), not_array = "x";
  const std::vector<std::pair<std::string, std::vector<json>>> wrong_types = {
      {"model", {not_string, json::object(), true}},
      {"messages", {not_array, json::object(), 3, json::array({"hi"}), json::array({json::array()})}},
      {"stream", {not_bool, 1, json::object()}},
      {"stream_options", {"x", 1, json::array()}},
      {"max_tokens", {not_number, 1.5, true, json::array({1})}},
      {"max_completion_tokens", {not_number, 2.5, json::object()}},
      {"temperature", {not_number, json::array({0.5}), false}},
      {"top_p", {not_number, json::object()}},
      {"top_k", {not_number, 2.5}},
      {"min_p", {not_number, true}},
      {"presence_penalty", {not_number, json::array()}},
      {"frequency_penalty", {not_number, json::object()}},
      {"repetition_penalty", {not_number, false}},
      {"logit_bias", {not_object, "5:1", 3}},
      {"seed", {not_number, json::object(), 1.5}},
      {"stop", {3, json::object(), json::array({1, 2}), json::array({json::object()})}},
      {"n", {"1", 1.5, json::array()}},
      {"logprobs", {"yes", 1, json::array()}},
      {"top_logprobs", {"2", 2.5}},
      {"tools", {"f", 3, json::object(), json::array({1})}},
      {"tool_choice", {3, json::array(), true}},
      {"chat_template_kwargs", {"x", 3, json::array()}},
      {"response_format", {"json", 3}},
      {"user", {3, json::object()}},
      {"ignore_eos", {"no", 0}},
      {"min_tokens", {"1", -1, 1.5}},
  };
  for (const auto& [field, values] : wrong_types) {
    for (size_t i = 0; i < values.size(); ++i) {
      add("/v1/chat/completions", with(chat, field, values[i]).dump(),
          "chat field " + field + " = " + values[i].dump());
    }
    json mixed = with(chat, field, values[0]);
    mixed["x_unknown_extension"] = json::array({1, "two"});
    mixed["another_unknown"] = nullptr;
    add("/v1/chat/completions", mixed.dump(), "unknown fields + bad " + field);
  }
  for (const auto& [field, values] : std::vector<std::pair<std::string, std::vector<json>>>{
           {"prompt",
            {3, json::object(), true, json::array({"a", "b"}), json::array({1.5}), json::array({json::object()})}},
           {"echo", {"yes", 1}},
           {"logprobs", {true, "2", 1.5}},
           {"max_tokens", {"8", -3}},
           {"temperature", {"warm"}},
           {"stream", {"no"}},
           {"suffix", {"tail"}},
           {"best_of", {4}}}) {
    for (const auto& v : values) {
      add("/v1/completions", with(completion, field, v).dump(), "completion field " + field + " = " + v.dump());
    }
  }

  // 4. Values out of range.
  for (const auto& [field, v] : std::vector<std::pair<std::string, json>>{{"temperature", -1},
                                                                          {"temperature", 3},
                                                                          {"top_p", 0},
                                                                          {"top_p", 1.01},
                                                                          {"top_k", -5},
                                                                          {"min_p", -0.1},
                                                                          {"min_p", 1.5},
                                                                          {"presence_penalty", 2.5},
                                                                          {"frequency_penalty", -2.5},
                                                                          {"repetition_penalty", -1},
                                                                          {"repetition_penalty", 0},
                                                                          {"n", 2},
                                                                          {"n", 0},
                                                                          {"top_logprobs", 21},
                                                                          {"top_logprobs", -1}}) {
    add("/v1/chat/completions", with(chat, field, v).dump(), "chat " + field + " out of range: " + v.dump());
  }
  // 5. max_tokens: negative, zero, huge, beyond the context.
  for (const json& v : {json(-1), json(0), json(-1000000), json(1e15), json(9223372036854775807LL),
                        json(context_length + 1), json(18446744073709551615ULL)}) {
    add("/v1/chat/completions", with(chat, "max_tokens", v).dump(), "chat max_tokens = " + v.dump());
    add("/v1/completions", with(completion, "max_tokens", v).dump(), "completion max_tokens = " + v.dump());
  }
  add("/v1/chat/completions", with(chat, "max_completion_tokens", -7).dump(), "negative max_completion_tokens");
  // 6. logit_bias with ids outside the vocabulary or bad values.
  for (const json& bias :
       {json{{std::to_string(vocab_size), 1}}, json{{"-1", 1}}, json{{"99999999999", 1}}, json{{"abc", 1}},
        json{{"1.5", 1}}, json{{"", 1}}, json{{"3", 200}}, json{{"3", -101}}, json{{"3", "x"}}, json{{"3", nullptr}}}) {
    add("/v1/chat/completions", with(chat, "logit_bias", bias).dump(), "logit_bias " + bias.dump());
  }
  // 7. Unknown model, in both endpoints.
  add("/v1/chat/completions", with(chat, "model", "no-such-model").dump(), "unknown model (chat)");
  add("/v1/completions", with(completion, "model", "gpt-4o").dump(), "unknown model (completions)");
  // 8. Oversize prompts: beyond the context length in tokens.
  std::string huge;
  for (int64_t i = 0; i < context_length + 16; ++i) huge += " hello";
  add("/v1/chat/completions", with(chat, "messages", json::array({{{"role", "user"}, {"content", huge}}})).dump(),
      "prompt longer than the context");
  add("/v1/completions", with(completion, "prompt", huge).dump(), "completion prompt longer than the context");
  json ids = json::array();
  for (int64_t i = 0; i < context_length + 1; ++i) ids.push_back(1);
  add("/v1/completions", with(completion, "prompt", ids).dump(), "token-id prompt longer than the context");
  add("/v1/completions", with(completion, "prompt", json::array({0, vocab_size})).dump(), "prompt token id >= vocab");
  add("/v1/completions", with(completion, "prompt", json::array({-1})).dump(), "negative prompt token id");
  // 9. Message structure.
  for (const json& msgs :
       {json::array(), json::array({{{"role", "user"}}}), json::array({{{"role", "robot"}, {"content", "x"}}}),
        json::array({{{"content", "x"}}}),
        json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}}),
        json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}}})}}}),
        json::array({{{"role", "user"}, {"content", json::array({"plain"})}}}),
        json::array({{{"role", "assistant"}, {"content", "x"}, {"tool_calls", "f"}}}),
        json::array({{{"role", "assistant"}, {"tool_calls", json::array({{{"function", {{"arguments", "{}"}}}}})}}})}) {
    add("/v1/chat/completions", with(chat, "messages", msgs).dump(), "messages " + msgs.dump());
  }
  // 10. stream_options without stream; unsupported features.
  add("/v1/chat/completions", with(chat, "stream_options", {{"include_usage", true}}).dump(),
      "stream_options without stream");
  add("/v1/chat/completions", with(chat, "tool_choice", "required").dump(), "tool_choice required");
  add("/v1/chat/completions", with(chat, "response_format", {{"type", "json_schema"}}).dump(), "json_schema");
  // 11. Tokenize / detokenize.
  add("/tokenize", "{", "tokenize bad JSON");
  add("/tokenize", json{{"prompt", 5}}.dump(), "tokenize prompt not a string");
  add("/tokenize", json::object().dump(), "tokenize without prompt");
  add("/detokenize", json{{"tokens", "1 2"}}.dump(), "detokenize tokens not an array");
  add("/detokenize", json{{"tokens", {1, vocab_size}}}.dump(), "detokenize id out of range");
  add("/detokenize", json{{"tokens", {-4}}}.dump(), "detokenize negative id");
  add("/detokenize", json{{"tokens", {"a"}}}.dump(), "detokenize id not an integer");
  return out;
}

}  // namespace specserve::test
