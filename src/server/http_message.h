#pragma once
// One HTTP/1.1 request as the parser delivers it and one response as a handler builds it. Header
// names are stored lower-cased; values with surrounding whitespace trimmed.
#include <string>
#include <string_view>
#include <vector>

namespace specserve::server {

struct HttpHeader {
  std::string name;
  std::string value;
};

struct HttpRequest {
  std::string method;     // as sent ("GET", "POST", ...)
  std::string target;     // request-target as sent ("/v1/models?x=1")
  std::string path;       // target without the query
  int version_minor = 1;  // HTTP/1.0 or HTTP/1.1
  std::vector<HttpHeader> headers;
  std::string body;  // de-chunked
  bool keep_alive = true;

  // The first header of that (lower-case) name, or null.
  const std::string* header(std::string_view lower_name) const {
    for (const auto& h : headers)
      if (h.name == lower_name) return &h.value;
    return nullptr;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<HttpHeader> headers;  // besides Content-Type / Content-Length / Connection
  std::string body;
};

// "OK", "Not Found", ... ("Unknown" for codes the server never sends).
const char* http_reason_phrase(int status);

}  // namespace specserve::server
