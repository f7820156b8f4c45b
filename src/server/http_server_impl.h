#pragma once
// Internal: HttpServer::Impl, the event loop behind HttpServer (http_server.h). Its members are
// defined by concern: the loop's life and cross-thread posting (http_server.cpp), connections
// (http_connections.cpp: accepting, reading, timeouts, closing), routing (http_routing.cpp:
// preflight, auth, CORS, handler threads) and responses (http_responses.cpp: complete and streamed).
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http_counters.h"
#include "server/http_message.h"
#include "server/http_request_parser.h"
#include "server/http_server.h"
#include "server/routes.h"
#include "server/server_options.h"
#include "server/serving_state.h"
#include "server/stream_pump.h"
#include "server/worker_pool.h"

namespace specserve::server {

class HttpServer::Impl {
 public:
  enum class State { Reading, Handling, Streaming, Closing };
  struct Conn {
    uint64_t id = 0;
    Impl* server = nullptr;
    bufferevent* bev = nullptr;
    event* timer = nullptr;
    HttpRequestParser parser;
    State state = State::Reading;
    bool keep_alive = true;  // of the request being served
    bool http10 = false;
    bool shut_wr = false;
    bool flushing = false;         // closing with a response's bytes still queued (counted in flushing_)
    bool refused = false;          // over the connection cap: answered 503 and closing
    std::vector<HttpHeader> cors;  // headers every response to this request carries
    explicit Conn(HttpLimits limits) : parser(limits) {}
  };

  Impl(ServerOptions options, std::shared_ptr<ServingState> state);
  ~Impl();

  int bind();
  void start();
  void begin_shutdown();
  void stop(int flush_ms);
  bool running() const { return running_; }
  size_t open_connections() const { return open_count_.load(); }

  ServerOptions options_;
  HttpCounters counters_;

 private:
  // --- cross-thread posting onto the loop (http_server.cpp) ---
  void post(std::function<void()> fn);
  static void on_wake(evutil_socket_t, short, void* arg);
  void on_shutdown();

  // --- connections (http_connections.cpp) ---
  static void on_accept(evconnlistener*, evutil_socket_t fd, sockaddr*, int, void* arg);
  void accept(evutil_socket_t fd);
  void arm(Conn* c, int seconds);
  static void on_read(bufferevent*, void* arg);
  void readable(Conn* c);
  void begin_closing(Conn* c);
  void shut_write(Conn* c);
  static void on_write(bufferevent*, void* arg);
  static void on_event(bufferevent*, short what, void* arg);
  static void on_timer(evutil_socket_t, short, void* arg);
  void close_now(Conn* c);

  // --- routing (http_routing.cpp) ---
  std::vector<HttpHeader> cors_headers(const HttpRequest& req) const;
  void dispatch(Conn* c, HttpRequest req);
  static RouteResult run_handler(const Route& route, const HttpRequest& req);

  // --- responses (http_responses.cpp) ---
  static HttpResponse transport_error(int status, const std::string& message, const std::string& code = "");
  void handled(Conn* c, RouteResult result);
  void on_delivered(uint64_t id, std::string bytes, bool finished, std::optional<HttpResponse> response);
  void send_response(Conn* c, HttpResponse r, bool counts_as_active = true, std::vector<HttpHeader> extra = {});
  void response_done(Conn* c, bool close);

  std::shared_ptr<ServingState> state_;
  RouteContext ctx_;
  Router router_;
  HttpLimits limits_;
  event_base* base_ = nullptr;
  event* wake_ = nullptr;
  evconnlistener* listener_ = nullptr;
  int port_ = -1;
  size_t cap_ = 1;
  size_t refusing_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::atomic<size_t> open_count_{0};
  std::atomic<int> active_responses_{0};
  std::atomic<int> flushing_{0};  // closing connections whose last response is not yet written out
  std::atomic<bool> draining_{false};
  std::atomic<bool> shutdown_begun_{false};  // on_shutdown ran: every connection knows it is the last
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex post_mutex_;
  std::vector<std::function<void()>> posted_;
  bool stopped_ = false;
  std::unique_ptr<StreamPump> pump_;
  std::unique_ptr<WorkerPool> workers_;
};

}  // namespace specserve::server
