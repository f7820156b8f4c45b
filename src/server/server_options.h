#pragma once
// Settings of the HTTP layer (from `specserve serve` flags). Defaults are chosen for one machine
// serving a handful of clients; every limit turns bad input into a 4xx, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace specserve::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;           // 0 = any free port (tests)
  std::string api_key;       // non-empty: /v1/*, /tokenize, /detokenize need "Authorization: Bearer <key>"
  std::string api_key_file;  // read into api_key when set (its first line, whitespace trimmed)
  // Origins answered with CORS headers ("*" = any); empty = no CORS headers.
  std::vector<std::string> allowed_origins;

  // Threads that run the request handlers (parse JSON, render, tokenize, enqueue). Connections and
  // streams cost no thread: one event loop serves every socket. 0 = 4.
  int http_threads = 0;
  int max_seqs = 16;    // engine concurrency (informational)
  int max_queue = 256;  // requests waiting for admission (informational)

  size_t max_body_bytes = 8u << 20;     // 413 above, for Content-Length and chunked bodies
  size_t max_header_bytes = 16 * 1024;  // request line + headers; 431 above
  size_t max_headers = 64;              // header lines; 431 above
  int max_connections = 4096;           // open sockets; above it a new connection gets 503 and is closed
  int64_t max_prompt_tokens = 0;        // 0 = the model's context length
  int64_t max_tokens_limit = 0;         // largest max_tokens accepted; 0 = the model's context length
  // max_tokens of a request that gives none, capped by what fits in the context after the prompt;
  // 0 = what fits. A demo client that forgets max_tokens gets an answer in seconds, not minutes.
  int64_t default_max_tokens = 1024;

  // Timeouts. header_timeout_s bounds the whole request head from its first byte (from the accept
  // for a new connection), however slowly it trickles in; read_timeout_s bounds the whole body after
  // the head. A response's write fails after write_timeout_s without progress (a client that stopped
  // reading). An idle keep-alive connection is closed after keep_alive_timeout_s.
  int header_timeout_s = 10;
  int read_timeout_s = 30;
  int write_timeout_s = 60;
  int keep_alive_timeout_s = 15;
  int heartbeat_ms = 1000;    // SSE comment when a stream has been silent this long
  int request_timeout_s = 0;  // 0 = none; otherwise a request still running is stopped (finish "abort")

  int shutdown_grace_s = 10;  // on SIGINT/SIGTERM, how long running requests may finish
};

// Handler threads for the options.
int http_pool_size(const ServerOptions& o);

}  // namespace specserve::server
