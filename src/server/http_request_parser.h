#pragma once
// Incremental HTTP/1.1 request parser (RFC 9112) for untrusted input. Bytes are fed as they arrive;
// memory stays bounded by the limits whatever the client sends: the head (request line + headers)
// by max_head_bytes, the body by max_body_bytes for Content-Length and chunked bodies alike (a
// chunk-size line that would pass the limit fails at once, before its data is read). Anything that
// would let two parties disagree on where a request ends (Content-Length together with
// Transfer-Encoding, two different Content-Lengths, a transfer coding other than chunked,
// obsolete line folding) is rejected. The parser itself never throws.
#include <cstddef>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace specserve::server {

struct HttpLimits {
  size_t max_head_bytes = 16 * 1024;   // request line + headers (and chunked trailers); 431 above
  size_t max_headers = 64;             // header lines; 431 above
  size_t max_target_bytes = 8 * 1024;  // request-target; 414 above
  size_t max_body_bytes = 8u << 20;    // de-chunked body; 413 above
};

class HttpRequestParser {
 public:
  enum class Status { NeedMore, Complete, Failed };

  explicit HttpRequestParser(HttpLimits limits) : limits_(limits) {}

  // Consumes bytes of `data` and returns how many. Stops at the end of a complete request (the
  // rest belongs to the next, pipelined one) or at the first error.
  size_t feed(std::string_view data);
  Status status() const { return status_; }
  bool started() const { return started_; }  // any byte of this request seen
  bool head_complete() const { return stage_ > Stage::Head; }
  // After the head: whether the client waits for "100 Continue" before sending its body.
  bool expects_continue() const;
  // After Failed: the HTTP status to answer with (400, 413, 414, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // After Complete: the request; the parser is then ready for the next one.
  HttpRequest take();
  void reset();

 private:
  enum class Stage { Head, Body, ChunkSize, ChunkData, ChunkDataEnd, Trailers, Done };
  size_t feed_head(std::string_view data);
  size_t feed_chunked(std::string_view data);
  bool parse_head();  // head_ → request_; false after fail()
  void fail(int status, std::string message);

  HttpLimits limits_;
  Status status_ = Status::NeedMore;
  Stage stage_ = Stage::Head;
  bool started_ = false;
  std::string head_;    // bytes of the head so far
  size_t scanned_ = 0;  // head_ bytes already searched for the blank line
  std::string line_;    // chunk-size or trailer line being read
  size_t trailer_bytes_ = 0;
  size_t remaining_ = 0;  // body or chunk bytes still to read
  HttpRequest request_;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace specserve::server
