// POST /v1/chat/completions and POST /v1/completions: validate → render/tokenize → check the
// context budget → enqueue → hand the output to the stream pump. No model work happens here.
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "server/chat_output.h"
#include "server/completion_output.h"
#include "server/json_fields.h"
#include "server/openai_request.h"
#include "server/routes.h"
#include "server/stream_pump.h"

namespace specserve::server {

namespace {

std::string new_request_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  uint64_t x = salt + counter.fetch_add(1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  return fmt::format("{}{:016x}", prefix, x);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

RequestLimits limits_for(const ServerOptions& o, const ModelInfo& info) {
  RequestLimits l;
  l.vocab_size = info.vocab_size;
  l.max_tokens_limit = o.max_tokens_limit > 0 ? o.max_tokens_limit : std::max<int64_t>(1, info.context_length);
  l.default_max_tokens =
      o.default_max_tokens > 0 ? std::min(o.default_max_tokens, l.max_tokens_limit) : l.max_tokens_limit;
  return l;
}

// Prompt and completion must fit the context; an absent max_tokens shrinks to what fits.
void check_budget(const ServerOptions& o, const ModelInfo& info, size_t prompt_len, CommonRequest& r,
                  const char* prompt_param) {
  const int64_t ctx = info.context_length;
  const int64_t max_prompt = o.max_prompt_tokens > 0 ? std::min(o.max_prompt_tokens, ctx - 1) : ctx - 1;
  const int64_t n = static_cast<int64_t>(prompt_len);
  if (n == 0) throw_bad_param(prompt_param, "the prompt is empty after tokenization");
  if (n > max_prompt) {
    throw ApiError(400,
                   fmt::format("The prompt is {} tokens; this server accepts at most {} prompt tokens "
                               "(context length {}).",
                               n, max_prompt, ctx),
                   "invalid_request_error", prompt_param, "context_length_exceeded");
  }
  if (n + r.max_tokens > ctx) {
    if (!r.max_tokens_given) {
      r.max_tokens = ctx - n;
      return;
    }
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                               "tokens ({} in the prompt, {} for the completion).",
                               ctx, n + r.max_tokens, n, r.max_tokens),
                   "invalid_request_error", "max_tokens", "context_length_exceeded");
  }
}

OutputOptions output_options(const ModelServices& model, const CommonRequest& r, const char* id_prefix) {
  OutputOptions o;
  o.id = new_request_id(id_prefix);
  o.model = model.info().id;
  o.created = unix_now();
  o.include_usage = r.include_usage;
  o.logprobs = r.logprobs;
  o.top_logprobs = r.top_logprobs;
  const ModelServices* m = &model;
  o.token_bytes = [m](int32_t t) { return m->token_bytes(t); };
  return o;
}

// A submitted request whose handler fails before its output is handed to the transport must not
// keep generating for nobody.
class CancelUnlessReleased {
 public:
  explicit CancelUnlessReleased(std::shared_ptr<engine::ResultStream> s) : stream_(std::move(s)) {}
  ~CancelUnlessReleased() {
    if (stream_) stream_->cancel();
  }
  void release() { stream_.reset(); }

 private:
  std::shared_ptr<engine::ResultStream> stream_;
};

}  // namespace

void register_generate_routes(Router& router, RouteContext& ctx) {
  router.add({"POST", "/v1/chat/completions", false, false, [&ctx](const HttpRequest& req) {
                return guarded([&]() -> RouteResult {
                  auto model = require_model(ctx);
                  const ModelInfo& info = model->info();
                  auto body = std::make_shared<nlohmann::json>(parse_json_body(req.body));
                  auto request =
                      std::make_shared<ChatRequest>(parse_chat_request(*body, limits_for(ctx.options, info)));
                  check_model_name(request->model, *model);
                  ChatPrompt prompt = model->render_chat(*request);
                  std::vector<int32_t> tokens = model->encode(prompt.text, /*add_special_tokens=*/false);
                  check_budget(ctx.options, info, tokens.size(), *request, "messages");

                  OutputOptions opt = output_options(*model, *request, "chatcmpl-");
                  opt.reasoning = prompt.reasoning;
                  if (request->tools_enabled)
                    opt.tools = &request->tools;  // request outlives the output (captured below)
                  auto stream = model->submit(*request, std::move(tokens));
                  CancelUnlessReleased guard(stream);
                  auto output = std::make_shared<ChatOutput>(std::move(opt));
                  // The model and the request (whose tools the output reads) must outlive the job.
                  auto keep = std::shared_ptr<ChatOutput>(output.get(), [output, request, model, body](ChatOutput*) {});
                  std::shared_ptr<PumpJob> job =
                      request->stream ? make_sse_job(stream, keep) : make_json_job(stream, keep);
                  guard.release();
                  return job;
                });
              }});

  router.add({"POST", "/v1/completions", false, false, [&ctx](const HttpRequest& req) {
                return guarded([&]() -> RouteResult {
                  auto model = require_model(ctx);
                  const ModelInfo& info = model->info();
                  nlohmann::json body = parse_json_body(req.body);
                  CompletionRequest request = parse_completion_request(body, limits_for(ctx.options, info));
                  check_model_name(request.model, *model);
                  std::vector<int32_t> tokens = request.prompt_text
                                                    ? model->encode(*request.prompt_text, /*add_special_tokens=*/true)
                                                    : request.prompt_tokens;
                  check_budget(ctx.options, info, tokens.size(), request, "prompt");
                  std::string echo;
                  if (request.echo) echo = request.prompt_text ? *request.prompt_text : model->decode(tokens);

                  OutputOptions opt = output_options(*model, request, "cmpl-");
                  auto stream = model->submit(request, std::move(tokens));
                  CancelUnlessReleased guard(stream);
                  auto output = std::make_shared<CompletionOutput>(std::move(opt), std::move(echo));
                  auto keep = std::shared_ptr<CompletionOutput>(output.get(), [output, model](CompletionOutput*) {});
                  std::shared_ptr<PumpJob> job =
                      request.stream ? make_sse_job(stream, keep) : make_json_job(stream, keep);
                  guard.release();
                  return job;
                });
              }});
}

}  // namespace specserve::server
