#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace specserve::server {

void throw_bad_param(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

nlohmann::json error_body(const ApiError& e) {
  nlohmann::json inner = {{"message", e.what()}, {"type", e.type()}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param().empty()) inner["param"] = e.param();
  if (!e.code().empty()) inner["code"] = e.code();
  return nlohmann::json{{"error", std::move(inner)}};
}

std::string error_type_for_status(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body_for_status(int status, const std::string& message) {
  // dump() with error_handler::replace: the message may quote client bytes that are not UTF-8.
  return error_body(ApiError(status, message, error_type_for_status(status)))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace specserve::server
