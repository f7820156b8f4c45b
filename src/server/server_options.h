#pragma once
// Settings of the HTTP layer (from `specserve serve` flags). Defaults are chosen for one machine
// serving a handful of clients; every limit turns bad input into a 4xx, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

namespace specserve::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port (tests)
  std::string api_key;  // non-empty: /v1/*, /tokenize, /detokenize need "Authorization: Bearer <key>"

  // Size of the HTTP worker pool. Every open connection (a streaming one for its whole life)
  // holds one thread, so it must exceed the concurrent streams the engine admits plus the queue,
  // with headroom for /health and /metrics. 0 = derived from max_seqs + max_queue (see
  // http_pool_size).
  int http_threads = 0;
  int max_seqs = 16;    // engine concurrency (for sizing the pool)
  int max_queue = 256;  // requests waiting for admission

  size_t max_body_bytes = 8u << 20;  // 413 above this
  int64_t max_prompt_tokens = 0;     // 0 = the model's context length
  int64_t max_tokens_limit = 0;      // largest max_tokens accepted; 0 = the model's context length
  int64_t default_max_tokens = 0;    // when the request gives none; 0 = what fits in the context

  // Socket timeouts. A streaming response writes at least a heartbeat every heartbeat_ms, so the
  // write timeout only bounds a client that stopped reading.
  int read_timeout_s = 30;
  int write_timeout_s = 60;
  int keep_alive_timeout_s = 15;
  int keep_alive_max_count = 100000;  // benchmark clients reuse connections
  int heartbeat_ms = 1000;
  int request_timeout_s = 0;  // 0 = none; otherwise a request still running is cancelled

  int shutdown_grace_s = 10;  // on SIGINT/SIGTERM, how long running requests may finish
};

// Threads for the HTTP pool given the options.
int http_pool_size(const ServerOptions& o);

}  // namespace specserve::server
