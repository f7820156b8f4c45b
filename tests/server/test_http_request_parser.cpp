// HttpRequestParser: framing (Content-Length, chunked, pipelining), the same result whatever the
// packet boundaries, every limit (with memory bounded while a too-large body streams in), and the
// ambiguous framings that enable request smuggling.
#include <gtest/gtest.h>

#include <string>

#include "server/http_request_parser.h"

using namespace specserve::server;

namespace {

HttpLimits small_limits() {
  HttpLimits l;
  l.max_body_bytes = 1024;
  l.max_head_bytes = 512;
  l.max_headers = 8;
  l.max_target_bytes = 128;
  return l;
}

// Feeds all of `bytes` in pieces of `step`; returns the parser's final state and consumed count.
struct Fed {
  HttpRequestParser::Status status;
  size_t consumed = 0;
  int error = 0;
  HttpRequest request;
};

Fed feed(const std::string& bytes, size_t step = 1u << 30, HttpLimits limits = small_limits()) {
  HttpRequestParser p(limits);
  Fed f;
  while (f.consumed < bytes.size() && p.status() == HttpRequestParser::Status::NeedMore) {
    const size_t n = std::min(step, bytes.size() - f.consumed);
    const size_t used = p.feed(std::string_view(bytes).substr(f.consumed, n));
    f.consumed += used;
    if (used < n) break;
  }
  f.status = p.status();
  f.error = p.error_status();
  if (f.status == HttpRequestParser::Status::Complete) f.request = p.take();
  return f;
}

const std::string kChunked =
    "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: t\r\n\r\n";

}  // namespace

TEST(HttpRequestParser, ContentLengthRequest) {
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\n\r\n{\"a\":1}";
  Fed f = feed(req);
  ASSERT_EQ(f.status, HttpRequestParser::Status::Complete);
  EXPECT_EQ(f.consumed, req.size());
  EXPECT_EQ(f.request.method, "POST");
  EXPECT_EQ(f.request.path, "/v1/chat/completions");
  EXPECT_EQ(f.request.body, "{\"a\":1}");
  ASSERT_NE(f.request.header("content-type"), nullptr);
  EXPECT_EQ(*f.request.header("content-type"), "application/json");
  EXPECT_TRUE(f.request.keep_alive);
}

TEST(HttpRequestParser, ChunkedBodyIsDecodedTheSameForEveryPacketSize) {
  for (size_t step : {1, 2, 3, 7, 64, 4096}) {
    Fed f = feed(kChunked, step);
    ASSERT_EQ(f.status, HttpRequestParser::Status::Complete) << step;
    EXPECT_EQ(f.request.body, "hello, world") << step;
    EXPECT_EQ(f.request.path, "/v1/completions") << step;
    EXPECT_EQ(f.request.target, "/v1/completions?x=1") << step;
    EXPECT_EQ(f.consumed, kChunked.size()) << step;
  }
}

TEST(HttpRequestParser, StopsAtTheEndOfARequestSoPipelinedOnesStayIntact) {
  const std::string one = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  HttpRequestParser p(small_limits());
  const std::string two = one + one;
  size_t used = p.feed(two);
  EXPECT_EQ(used, one.size());
  ASSERT_EQ(p.status(), HttpRequestParser::Status::Complete);
  p.take();
  EXPECT_EQ(p.feed(std::string_view(two).substr(used)), one.size());
  EXPECT_EQ(p.status(), HttpRequestParser::Status::Complete);
}

TEST(HttpRequestParser, ChunkedBodyOverTheLimitFailsBeforeItsDataIsRead) {
  // One chunk announcing more than the limit: 413 at its size line.
  Fed f = feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n");
  EXPECT_EQ(f.status, HttpRequestParser::Status::Failed);
  EXPECT_EQ(f.error, 413);
  // Many small chunks adding up past the limit: 413 at the one that crosses it, having held at
  // most the limit.
  std::string many = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 100; ++i) many += "40\r\n" + std::string(64, 'x') + "\r\n";
  f = feed(many, 100);
  EXPECT_EQ(f.status, HttpRequestParser::Status::Failed);
  EXPECT_EQ(f.error, 413);
  EXPECT_LT(f.consumed, 1024u + 200u);
  // Content-Length over the limit: 413 from the head alone.
  f = feed("POST / HTTP/1.1\r\nContent-Length: 1025\r\n\r\n");
  EXPECT_EQ(f.error, 413);
}

TEST(HttpRequestParser, HeaderLimits) {
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(feed(many + "\r\n").error, 431);
  // A head that never ends fails once it passes the size limit, not when it ends.
  Fed f = feed("GET / HTTP/1.1\r\nX: " + std::string(4096, 'a'), 10);
  EXPECT_EQ(f.error, 431);
  EXPECT_LE(f.consumed, 512u + 4u);
  EXPECT_EQ(feed("GET /" + std::string(200, 'a') + " HTTP/1.1\r\n\r\n").error, 414);
}

TEST(HttpRequestParser, AmbiguousFramingIsRejected) {
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").error, 501);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").error, 400);
  EXPECT_EQ(feed("GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n").error, 400);
  EXPECT_EQ(feed("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").error, 400);
  EXPECT_EQ(feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n").error, 400);
}

TEST(HttpRequestParser, RequestLineAndVersions) {
  EXPECT_EQ(feed("THIS IS NOT HTTP\r\n\r\n").error, 400);
  EXPECT_EQ(feed("GET / HTTP/2.0\r\n\r\n").error, 505);
  EXPECT_EQ(feed("GET  / HTTP/1.1\r\n\r\n").error, 400);
  Fed f = feed("\r\n\r\nGET / HTTP/1.0\r\n\r\n");  // leading empty lines are ignored
  ASSERT_EQ(f.status, HttpRequestParser::Status::Complete);
  EXPECT_FALSE(f.request.keep_alive);
  f = feed("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n");
  ASSERT_EQ(f.status, HttpRequestParser::Status::Complete);
  EXPECT_FALSE(f.request.keep_alive);
  f = feed("GET / HTTP/1.1\nHost: a\n\n");  // bare LF line endings
  ASSERT_EQ(f.status, HttpRequestParser::Status::Complete);
  EXPECT_EQ(*f.request.header("host"), "a");
}
