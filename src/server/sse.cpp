#include "server/sse.h"

#include <nlohmann/json.hpp>

namespace specserve::server {

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_data(const nlohmann::json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace specserve::server
