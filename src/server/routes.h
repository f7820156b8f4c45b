#pragma once
// The endpoint handlers, grouped by concern; each group registers its routes on the router. A
// handler gets the complete request and returns either a response or a PumpJob (an engine
// request whose output the stream pump delivers). Handlers run on the handler threads unless
// registered to run on the event loop (cheap, non-blocking ones: /health, /metrics, /v1/models).
#include <nlohmann/json_fwd.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/http_counters.h"
#include "server/http_message.h"
#include "server/model_services.h"
#include "server/server_options.h"
#include "server/serving_state.h"
#include "server/stream_pump.h"

namespace specserve::server {

struct RouteContext {
  const ServerOptions& options;
  ServingState& state;
  HttpCounters& counters;
};

using RouteResult = std::variant<HttpResponse, std::shared_ptr<PumpJob>>;
using RouteHandler = std::function<RouteResult(const HttpRequest&)>;

struct Route {
  std::string method;
  std::string path;     // exact path, or a prefix when `prefix`
  bool prefix = false;  // "/v1/models/" matches "/v1/models/<id>"
  bool on_event_loop = false;
  RouteHandler handler;
};

class Router {
 public:
  void add(Route route) { routes_.push_back(std::move(route)); }
  struct Match {
    const Route* route = nullptr;  // null: 404 when `allow` is empty, else 405
    std::string allow;             // methods the path accepts ("GET, POST")
  };
  Match match(const std::string& method, const std::string& path) const;

 private:
  std::vector<Route> routes_;
};

// GET /health, GET /v1/models, GET /v1/models/{id}, GET /metrics
void register_info_routes(Router& router, RouteContext& ctx);
// POST /v1/chat/completions, POST /v1/completions
void register_generate_routes(Router& router, RouteContext& ctx);
// POST /tokenize, POST /detokenize
void register_tokenize_routes(Router& router, RouteContext& ctx);

// --- helpers shared by handlers ---
// The loaded model, or ApiError 503 while loading / draining.
std::shared_ptr<ModelServices> require_model(const RouteContext& ctx);
// 404 model_not_found unless `requested` is empty or names the served model.
void check_model_name(const std::string& requested, const ModelServices& model);
HttpResponse json_response(int status, const nlohmann::json& body);
HttpResponse error_response(const ApiError& e);
HttpResponse internal_error_response(const std::exception& e);

// Runs a handler body; its exceptions become OpenAI-shaped error responses.
template <typename Fn>
RouteResult guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const ApiError& e) {
    return error_response(e);
  } catch (const Error& e) {
    // An Error from the tokenizer / template / sampling layer is about this request's input.
    return error_response(ApiError(400, e.what()));
  } catch (const std::exception& e) {
    return internal_error_response(e);
  }
}

}  // namespace specserve::server
