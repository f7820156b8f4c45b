#pragma once
// The endpoint handlers, grouped by concern; each group registers its routes on the server.
#include <nlohmann/json_fwd.hpp>

#include <exception>
#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/http_counters.h"
#include "server/model_services.h"
#include "server/server_options.h"
#include "server/serving_state.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace specserve::server {

struct RouteContext {
  const ServerOptions& options;
  ServingState& state;
  HttpCounters& counters;
};

// GET /health, GET /v1/models, GET /metrics
void register_info_routes(httplib::Server& svr, RouteContext& ctx);
// POST /v1/chat/completions, POST /v1/completions
void register_generate_routes(httplib::Server& svr, RouteContext& ctx);
// POST /tokenize, POST /detokenize
void register_tokenize_routes(httplib::Server& svr, RouteContext& ctx);

// --- helpers shared by handlers ---
// The loaded model, or ApiError 503 while loading / draining.
std::shared_ptr<ModelServices> require_model(const RouteContext& ctx);
// 404 model_not_found unless `requested` is empty or names the served model.
void check_model_name(const std::string& requested, const ModelServices& model);
void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_error(httplib::Response& res, const ApiError& e);
void send_internal_error(httplib::Response& res, const std::exception& e);

// Runs a handler body; its exceptions become OpenAI-shaped error responses.
template <typename Fn>
void guarded(httplib::Response& res, Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    // An Error from the tokenizer / template / sampling layer is about this request's input.
    send_error(res, ApiError(400, e.what()));
  } catch (const std::exception& e) {
    send_internal_error(res, e);
  }
}

}  // namespace specserve::server
