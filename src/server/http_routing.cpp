// HttpServer::Impl's routing of a complete request: CORS preflight and headers, the router's 404 /
// 405, bearer auth, then the handler on the loop or on a handler thread.
#include <algorithm>
#include <cctype>
#include <exception>
#include <memory>
#include <variant>

#include <fmt/format.h>

#include "core/log.h"
#include "server/api_error.h"
#include "server/http_server_impl.h"

namespace specserve::server {

namespace {

bool needs_auth(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// Constant-time comparison, so response timing does not reveal a key prefix.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}

// "Authorization: Bearer <key>" with the scheme matched case-insensitively (RFC 7235 §2.1).
bool bearer_matches(const std::string* auth, const std::string& key) {
  if (!auth || auth->size() < 7) return false;
  std::string scheme = auth->substr(0, 6);
  for (char& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (scheme != "bearer" || ((*auth)[6] != ' ' && (*auth)[6] != '\t')) return false;
  size_t start = 7;
  while (start < auth->size() && ((*auth)[start] == ' ' || (*auth)[start] == '\t')) ++start;
  return same_secret(auth->substr(start), key);
}

}  // namespace

std::vector<HttpHeader> HttpServer::Impl::cors_headers(const HttpRequest& req) const {
  const auto& allowed = options_.allowed_origins;
  const std::string* origin = req.header("origin");
  if (allowed.empty() || !origin) return {};
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return {{"Access-Control-Allow-Origin", "*"}};
  if (std::find(allowed.begin(), allowed.end(), *origin) != allowed.end())
    return {{"Access-Control-Allow-Origin", *origin}, {"Vary", "Origin"}};
  return {};
}

void HttpServer::Impl::dispatch(Conn* c, HttpRequest req) {
  evtimer_del(c->timer);
  c->state = State::Handling;
  c->keep_alive = req.keep_alive;
  c->http10 = req.version_minor == 0;
  c->cors = cors_headers(req);
  active_responses_.fetch_add(1);
  SS_LOG_DEBUG("http", "{} {}", req.method, req.target);

  if (req.method == "OPTIONS" && !c->cors.empty()) {  // CORS preflight
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    const std::string* asked = req.header("access-control-request-headers");
    r.headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                 {"Access-Control-Allow-Headers", asked ? *asked : "Authorization, Content-Type"},
                 {"Access-Control-Max-Age", "600"}};
    send_response(c, std::move(r));
    return;
  }
  Router::Match m = router_.match(req.method, req.path);
  if (!m.route) {
    if (m.allow.empty()) {
      send_response(c, transport_error(404, fmt::format("no such endpoint: {} {}", req.method, req.path)));
    } else {
      send_response(
          c, transport_error(405, fmt::format("{} is not allowed on {} (allowed: {})", req.method, req.path, m.allow)),
          true, {{"Allow", m.allow}});
    }
    return;
  }
  if (!options_.api_key.empty() && needs_auth(req.path) &&
      !bearer_matches(req.header("authorization"), options_.api_key)) {
    send_response(c,
                  error_response(ApiError(401, "Invalid or missing API key (expected 'Authorization: Bearer <key>')",
                                          "authentication_error", "", "invalid_api_key")),
                  true, {{"WWW-Authenticate", "Bearer"}});
    return;
  }
  const Route* route = m.route;
  if (route->on_event_loop) {
    handled(c, run_handler(*route, req));
    return;
  }
  auto shared = std::make_shared<HttpRequest>(std::move(req));
  workers_->submit([this, id = c->id, route, shared] {
    RouteResult result = run_handler(*route, *shared);
    post([this, id, result = std::move(result)]() mutable {
      auto it = conns_.find(id);
      if (it == conns_.end()) {
        // The client left while the handler ran: nobody will read this output.
        if (auto* job = std::get_if<std::shared_ptr<PumpJob>>(&result)) (*job)->cancel();
        return;
      }
      handled(it->second.get(), std::move(result));
    });
  });
}

RouteResult HttpServer::Impl::run_handler(const Route& route, const HttpRequest& req) {
  try {
    return route.handler(req);
  } catch (const std::exception& e) {
    return internal_error_response(e);
  }
}

}  // namespace specserve::server
