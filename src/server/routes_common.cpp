// Helpers shared by the route handlers.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/log.h"
#include "server/routes.h"
#include "server/sse.h"

namespace specserve::server {

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
  throw ApiError(404, fmt::format("The model '{}' does not exist (this server serves '{}')", requested, model.info().id),
                 "invalid_request_error", "model", "model_not_found");
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), error_body(e)); }

void send_internal_error(httplib::Response& res, const std::exception& e) {
  SS_LOG_ERROR("http", "internal error: {}", e.what());
  send_error(res, ApiError(500, std::string("internal server error: ") + e.what(), "server_error"));
}

}  // namespace specserve::server
