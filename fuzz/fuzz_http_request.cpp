// libFuzzer target: the HTTP/1.1 request parser (server/http_request_parser.cpp) on arbitrary
// bytes. Every input must end Complete, Failed with a 4xx/5xx status, or NeedMore — never a
// crash, sanitizer report, hang or exception — with memory within the limits, and the result must
// not depend on how the bytes are split into packets (the first byte of the input picks the split).
// The parser depends only on the standard library, so it is compiled into this target directly.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http_request_parser.cpp"

namespace {

using namespace specserve::server;

struct Outcome {
  HttpRequestParser::Status status;
  int error = 0;
  size_t consumed = 0;
  HttpRequest request;
};

Outcome run(std::string_view bytes, size_t step, const HttpLimits& limits) {
  HttpRequestParser p(limits);
  Outcome o;
  while (o.consumed < bytes.size() && p.status() == HttpRequestParser::Status::NeedMore) {
    const size_t n = std::min(step, bytes.size() - o.consumed);
    const size_t used = p.feed(bytes.substr(o.consumed, n));
    if (used > n) std::abort();
    o.consumed += used;
    if (used < n && p.status() == HttpRequestParser::Status::NeedMore) std::abort();  // must take all it is given
  }
  o.status = p.status();
  o.error = p.error_status();
  if (o.status == HttpRequestParser::Status::Failed && (o.error < 400 || o.error > 599)) std::abort();
  if (o.status == HttpRequestParser::Status::Complete) {
    o.request = p.take();
    if (o.request.body.size() > limits.max_body_bytes) std::abort();
    if (p.status() != HttpRequestParser::Status::NeedMore || p.started()) std::abort();  // take() resets
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = 1 + data[0] % 17;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  HttpLimits limits;
  limits.max_body_bytes = 4096;
  limits.max_head_bytes = 2048;
  limits.max_headers = 16;
  limits.max_target_bytes = 512;
  const Outcome whole = run(bytes, bytes.size() + 1, limits);
  const Outcome split = run(bytes, step, limits);
  if (whole.status != split.status || whole.error != split.error) std::abort();
  // Where a failure is noticed may depend on the split (a head over the limit); success may not.
  if (whole.status != HttpRequestParser::Status::Failed && whole.consumed != split.consumed) std::abort();
  if (whole.status == HttpRequestParser::Status::Complete &&
      (whole.request.body != split.request.body || whole.request.target != split.request.target ||
       whole.request.headers.size() != split.request.headers.size() ||
       whole.request.keep_alive != split.request.keep_alive)) {
    std::abort();
  }
  return 0;
}
