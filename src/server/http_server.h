#pragma once
// The HTTP front end (cpp-httplib 0.11.4, Debian's compiled build). Its threads are thin: they
// parse, validate, tokenize and enqueue; they never run model work. Responsibilities here are
// the transport ones: the worker pool size, socket timeouts, keep-alive, body size limit,
// bearer auth, OpenAI-shaped bodies for every error status, and an orderly stop.
#include <memory>
#include <thread>

#include "server/http_counters.h"
#include "server/server_options.h"
#include "server/serving_state.h"

namespace httplib {
class Server;
}

namespace specserve::server {

struct RouteContext;

class HttpServer {
 public:
  HttpServer(ServerOptions options, std::shared_ptr<ServingState> state);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (port 0 picks a free one) and returns the port. Throws Error when
  // the address cannot be bound. Binding happens before loading so /health answers 503 at once.
  int bind();
  // Serves on a background thread.
  void start();
  // Stops accepting connections and returns once every handler thread has finished.
  void stop();
  bool running() const;

  const ServerOptions& options() const { return options_; }
  HttpCounters& counters() { return counters_; }

 private:
  void configure();

  ServerOptions options_;
  std::shared_ptr<ServingState> state_;
  HttpCounters counters_;
  std::unique_ptr<RouteContext> route_context_;  // handlers hold references into it
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  int port_ = -1;
};

}  // namespace specserve::server
