#pragma once
// A small blocking HTTP/1.1 client over one TCP connection per request, for the load generator
// (`specserve bench serve-load`): it sends a request with `Connection: close` and reads the
// response, handing body bytes (de-chunked) to a callback as they arrive, so SSE chunks can be
// timed. No TLS, no redirects, no proxies: it talks to a server on a known host and port.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace specserve::server {

struct HttpClientRequest {
  std::string method = "GET";
  std::string path = "/";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct HttpClientResponse {
  int status = 0;     // 0 when no response was read (see error)
  std::string body;   // the body when no callback consumed it
  std::string error;  // transport error ("" on success)
};

// Sends `request` to host:port and reads the whole response. `on_body`, when set, receives the
// body bytes of a 2xx response as they arrive (and `body` stays empty; other statuses fill `body`);
// returning false stops reading. `timeout_s` bounds each connect, send and receive.
HttpClientResponse http_fetch(const std::string& host, int port, const HttpClientRequest& request, int timeout_s,
                              const std::function<bool(const char*, size_t)>& on_body = {});

}  // namespace specserve::server
