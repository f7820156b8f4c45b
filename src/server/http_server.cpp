#include "server/http_server.h"

#include <chrono>
#include <thread>

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"
#include "server/api_error.h"
#include "server/routes.h"

namespace specserve::server {

int http_pool_size(const ServerOptions& o) {
  if (o.http_threads > 0) return o.http_threads;
  // Each admitted or queued streaming request holds a thread for its whole life; 16 more serve
  // /health, /metrics and requests that are rejected quickly.
  return std::max(32, o.max_seqs + o.max_queue + 16);
}

namespace {

// httplib 0.11.4 listens with a backlog of 5: a burst of clients connecting at once (a benchmark
// at concurrency 64, or 16 SDK streams) overflows it and some connects fail. Linux lets listen()
// be called again on a listening socket to raise the backlog; the socket is a protected member.
class Server : public httplib::Server {
 public:
  void raise_backlog() {
    const socket_t fd = svr_sock_;
    if (fd != INVALID_SOCKET) ::listen(fd, SOMAXCONN);
  }
};

bool needs_auth(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// Constant-time comparison, so response timing does not reveal a key prefix.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}

std::string status_message(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "no such endpoint";
    case 405: return "method not allowed";
    case 408: return "request timed out";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    case 416: return "range not satisfiable";
    default: return fmt::format("HTTP error {}", status);
  }
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, std::shared_ptr<ServingState> state)
    : options_(std::move(options)), state_(std::move(state)), svr_(std::make_unique<Server>()) {
  configure();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::configure() {
  httplib::Server& svr = *svr_;
  // Debian's build is precompiled, so CPPHTTPLIB_THREAD_POOL_COUNT has no effect; the runtime
  // hook sets the pool (docs/DEPENDENCIES.md §3).
  const int pool = http_pool_size(options_);
  svr.new_task_queue = [pool] { return new httplib::ThreadPool(static_cast<size_t>(pool)); };
  svr.set_read_timeout(options_.read_timeout_s, 0);
  svr.set_write_timeout(options_.write_timeout_s, 0);
  svr.set_keep_alive_timeout(options_.keep_alive_timeout_s);
  svr.set_keep_alive_max_count(static_cast<size_t>(options_.keep_alive_max_count));
  svr.set_payload_max_length(options_.max_body_bytes);
  svr.set_tcp_nodelay(true);  // SSE chunks are small and latency-sensitive

  const std::string key = options_.api_key;
  svr.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || !needs_auth(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
        same_secret(auth.substr(prefix.size()), key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(res, ApiError(401, "Invalid or missing API key (expected 'Authorization: Bearer <key>')",
                             "authentication_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });

  // Every error status gets an OpenAI-shaped body: httplib's own (404 route, 413 body size,
  // 400 malformed request line) arrive here with an empty body.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.has_header("Content-Type")) return httplib::Server::HandlerResponse::Unhandled;
    res.set_content(error_body_for_status(res.status, status_message(res.status)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_internal_error(res, e);
      return;
    } catch (...) {
    }
    send_internal_error(res, std::runtime_error("unknown exception"));
  });
  HttpCounters* counters = &counters_;
  svr.set_logger([counters](const httplib::Request& req, const httplib::Response& res) {
    counters->count_status(res.status);
    SS_LOG_DEBUG("http", "{} {} -> {}", req.method, req.path, res.status);
  });

  // Route handlers capture this context; it lives as long as the server.
  auto* ctx = new RouteContext{options_, *state_, counters_};
  svr.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
  });
  register_info_routes(svr, *ctx);
  register_generate_routes(svr, *ctx);
  register_tokenize_routes(svr, *ctx);
  route_context_.reset(ctx);
}

int HttpServer::bind() {
  port_ = options_.port == 0 ? svr_->bind_to_any_port(options_.host) : (svr_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ < 0) fail("cannot listen on {}:{} (address in use or not available)", options_.host, options_.port);
  static_cast<Server&>(*svr_).raise_backlog();
  return port_;
}

void HttpServer::start() {
  SS_CHECK(port_ >= 0, "HttpServer::start() before bind()");
  thread_ = std::thread([this] { svr_->listen_after_bind(); });
}

void HttpServer::stop() {
  // The engine has finished or cancelled every request by now; give the streaming responses a moment
  // to write their final events and [DONE] before the sockets close (a stop right away can cut a
  // stream's last chunks off).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (counters_.open_streams.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (svr_) svr_->stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::running() const { return svr_ && svr_->is_running(); }

}  // namespace specserve::server
