// Helpers shared by the route handlers.
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/log.h"
#include "server/routes.h"
#include "server/sse.h"

namespace specserve::server {

Router::Match Router::match(const std::string& method, const std::string& path) const {
  Match m;
  for (const auto& r : routes_) {
    const bool path_ok =
        r.prefix ? path.size() > r.path.size() && path.compare(0, r.path.size(), r.path) == 0 : path == r.path;
    if (!path_ok) continue;
    if (r.method == method) {
      m.route = &r;
      return m;
    }
    if (m.allow.find(r.method) == std::string::npos) m.allow += (m.allow.empty() ? "" : ", ") + r.method;
  }
  return m;
}

std::shared_ptr<ModelServices> require_model(const RouteContext& ctx) {
  switch (ctx.state.phase()) {
    case Phase::Loading:
      throw ApiError(503, fmt::format("the model is still loading ({:.0f}%)", ctx.state.progress() * 100),
                     "service_unavailable", "", "model_loading");
    case Phase::Draining:
      throw ApiError(503, "the server is shutting down", "service_unavailable", "", "shutting_down");
    case Phase::Failed:
      throw ApiError(503, "the model failed to load: " + ctx.state.progress_text(), "service_unavailable");
    case Phase::Ready: break;
  }
  auto model = ctx.state.model();
  if (!model) throw ApiError(503, "no model is loaded", "service_unavailable");
  return model;
}

void check_model_name(const std::string& requested, const ModelServices& model) {
  if (requested.empty() || requested == model.info().id) return;
  throw ApiError(404,
                 fmt::format("The model '{}' does not exist (this server serves '{}')", requested, model.info().id),
                 "invalid_request_error", "model", "model_not_found");
}

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

HttpResponse error_response(const ApiError& e) { return json_response(e.status(), error_body(e)); }

HttpResponse internal_error_response(const std::exception& e) {
  SS_LOG_ERROR("http", "internal error: {}", e.what());
  return error_response(ApiError(500, std::string("internal server error: ") + e.what(), "server_error"));
}

}  // namespace specserve::server
