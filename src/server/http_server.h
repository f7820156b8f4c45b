#pragma once
// The HTTP/1.1 front end: one event loop (libevent) owns every socket, so an idle, slow or
// streaming connection costs a little memory and no thread. Requests are parsed by
// HttpRequestParser under fixed limits; complete ones are authorised and routed on the loop, then
// run on a few handler threads (JSON, chat template, tokenizer, enqueue) — never model work. Engine
// output reaches the sockets through the stream pump. Responsibilities here are the transport
// ones: limits and timeouts, keep-alive, the connection cap, bearer auth, CORS, OpenAI-shaped bodies
// for every error status, and a shutdown bounded in time whatever the clients do.
#include <memory>

#include "server/http_counters.h"
#include "server/server_options.h"
#include "server/serving_state.h"

namespace specserve::server {

class HttpServer {
 public:
  HttpServer(ServerOptions options, std::shared_ptr<ServingState> state);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (port 0 picks a free one) and returns the port. Throws Error when
  // the address cannot be bound. Binding happens before loading so /health answers 503 at once.
  int bind();
  // Serves on a background thread (the event loop).
  void start();
  // Stops accepting, closes idle and half-received connections at once; requests being served
  // continue (their responses say Connection: close). Returns immediately.
  void begin_shutdown();
  // begin_shutdown(), then waits at most `flush_ms` for the open responses to finish writing, then
  // closes every connection and stops the loop and the handler threads.
  void stop(int flush_ms = 500);
  bool running() const;

  const ServerOptions& options() const;
  HttpCounters& counters();
  // Open client connections (for tests and /metrics).
  size_t open_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace specserve::server
