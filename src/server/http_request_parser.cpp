#include "server/http_request_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

namespace specserve::server {

namespace {

bool is_token_char(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~': return true;
    default: return false;
  }
}

bool is_token(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return is_token_char(static_cast<unsigned char>(c)); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value lists `token` (case-insensitive).
bool lists_token(std::string_view value, std::string_view token) {
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    if (lower(trim(value.substr(pos, comma - pos))) == token) return true;
    pos = comma + 1;
  }
  return false;
}

// The lines of a head (LF or CRLF endings), the final blank line excluded.
std::vector<std::string_view> split_lines(std::string_view head) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < head.size()) {
    size_t nl = head.find('\n', pos);
    if (nl == std::string_view::npos) nl = head.size();
    std::string_view line = head.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    pos = nl + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

}  // namespace

const char* http_reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

void HttpRequestParser::fail(int status, std::string message) {
  status_ = Status::Failed;
  error_status_ = status;
  error_message_ = std::move(message);
}

void HttpRequestParser::reset() {
  status_ = Status::NeedMore;
  stage_ = Stage::Head;
  started_ = false;
  head_.clear();
  scanned_ = 0;
  line_.clear();
  trailer_bytes_ = 0;
  remaining_ = 0;
  request_ = HttpRequest{};
  error_status_ = 0;
  error_message_.clear();
}

bool HttpRequestParser::expects_continue() const {
  const std::string* expect = request_.header("expect");
  return head_complete() && request_.version_minor == 1 && expect && lower(*expect) == "100-continue";
}

HttpRequest HttpRequestParser::take() {
  HttpRequest r = std::move(request_);
  reset();
  return r;
}

size_t HttpRequestParser::feed(std::string_view data) {
  size_t used = 0;
  while (status_ == Status::NeedMore && used < data.size()) {
    std::string_view rest = data.substr(used);
    switch (stage_) {
      case Stage::Head: used += feed_head(rest); break;
      case Stage::Body: {
        const size_t n = std::min(remaining_, rest.size());
        request_.body.append(rest.data(), n);
        remaining_ -= n;
        used += n;
        if (remaining_ == 0) stage_ = Stage::Done;
        break;
      }
      case Stage::Done: break;
      default: used += feed_chunked(rest); break;
    }
    if (stage_ == Stage::Done && status_ == Status::NeedMore) status_ = Status::Complete;
  }
  return used;
}

size_t HttpRequestParser::feed_head(std::string_view data) {
  // Empty lines before the request line are ignored (RFC 9112 §2.2).
  size_t skipped = 0;
  if (head_.empty()) {
    while (skipped < data.size() && (data[skipped] == '\r' || data[skipped] == '\n')) ++skipped;
    data.remove_prefix(skipped);
    if (data.empty()) return skipped;
  }
  started_ = true;
  const size_t before = head_.size();
  // Never hold more than the limit (+ the 4 bytes of a terminator straddling it).
  const size_t room = limits_.max_head_bytes + 4 > before ? limits_.max_head_bytes + 4 - before : 0;
  head_.append(data.data(), std::min(room, data.size()));
  // The head ends at the first empty line: "\n\n" or "\n\r\n".
  size_t end = std::string::npos;
  for (size_t i = scanned_ > 0 ? scanned_ - 1 : 0; i < head_.size(); ++i) {
    if (head_[i] != '\n') continue;
    if (i + 1 < head_.size() && head_[i + 1] == '\n') {
      end = i + 2;
      break;
    }
    if (i + 2 < head_.size() && head_[i + 1] == '\r' && head_[i + 2] == '\n') {
      end = i + 3;
      break;
    }
  }
  if (end == std::string::npos) {
    scanned_ = head_.size() >= 2 ? head_.size() - 2 : 0;
    if (head_.size() > limits_.max_head_bytes) fail(431, "the request header is too large");
    return skipped + (head_.size() - before);
  }
  if (end > limits_.max_head_bytes) {
    fail(431, "the request header is too large");
    return skipped + (head_.size() - before);
  }
  head_.resize(end);
  const size_t consumed = skipped + (end - before);
  if (parse_head()) {
    if (stage_ == Stage::Head) stage_ = Stage::Done;  // no body
  }
  return consumed;
}

bool HttpRequestParser::parse_head() {
  std::vector<std::string_view> lines = split_lines(head_);
  if (lines.empty()) {
    fail(400, "empty request");
    return false;
  }
  // request-line = method SP request-target SP HTTP-version
  std::string_view rl = lines[0];
  const size_t sp1 = rl.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || rl.find(' ', sp2 + 1) != std::string_view::npos) {
    fail(400, "malformed request line");
    return false;
  }
  std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1), version = rl.substr(sp2 + 1);
  if (!is_token(method)) {
    fail(400, "malformed request method");
    return false;
  }
  if (target.size() > limits_.max_target_bytes) {
    fail(414, "the request URI is too long");
    return false;
  }
  if (target.empty() || std::any_of(target.begin(), target.end(),
                                    [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    fail(400, "malformed request target");
    return false;
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7]))) {
    fail(400, "malformed HTTP version");
    return false;
  }
  if (version[5] != '1') {
    fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
    return false;
  }
  request_.method = std::string(method);
  request_.target = std::string(target);
  request_.path = request_.target.substr(0, request_.target.find('?'));
  request_.version_minor = version[7] == '0' ? 0 : 1;

  if (lines.size() - 1 > limits_.max_headers) {
    fail(431, "too many request headers");
    return false;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.empty() || line[0] == ' ' || line[0] == '\t') {
      fail(400, "obsolete header line folding is not accepted");
      return false;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
      fail(400, "malformed header line");
      return false;
    }
    std::string_view value = trim(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(),
                    [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; })) {
      fail(400, "control character in a header value");
      return false;
    }
    request_.headers.push_back({lower(line.substr(0, colon)), std::string(value)});
  }

  // Message framing (RFC 9112 §6).
  const std::string* te = nullptr;
  const std::string* cl = nullptr;
  for (const auto& h : request_.headers) {
    if (h.name == "transfer-encoding") {
      if (te) {
        fail(400, "more than one Transfer-Encoding header");
        return false;
      }
      te = &h.value;
    } else if (h.name == "content-length") {
      if (cl && *cl != h.value) {
        fail(400, "conflicting Content-Length headers");
        return false;
      }
      cl = &h.value;
    }
  }
  const std::string* conn = request_.header("connection");
  if (request_.version_minor == 0)
    request_.keep_alive = conn && lists_token(*conn, "keep-alive");
  else
    request_.keep_alive = !(conn && lists_token(*conn, "close"));

  if (te) {
    if (cl) {
      fail(400, "both Content-Length and Transfer-Encoding are present");
      return false;
    }
    if (request_.version_minor == 0) {
      fail(400, "Transfer-Encoding in an HTTP/1.0 request");
      return false;
    }
    if (lower(*te) != "chunked") {
      fail(501, "unsupported transfer encoding (only chunked is accepted)");
      return false;
    }
    stage_ = Stage::ChunkSize;
    return true;
  }
  if (cl) {
    if (cl->empty() || cl->size() > 18 ||
        !std::all_of(cl->begin(), cl->end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      fail(400, "malformed Content-Length");
      return false;
    }
    const uint64_t n = std::stoull(*cl);
    if (n > limits_.max_body_bytes) {
      fail(413, "the request body is larger than the server accepts");
      return false;
    }
    remaining_ = static_cast<size_t>(n);
    if (remaining_ > 0) stage_ = Stage::Body;
    request_.body.reserve(remaining_);
  }
  return true;
}

size_t HttpRequestParser::feed_chunked(std::string_view data) {
  size_t used = 0;
  // Reads one line into line_ (without its terminator); false when more bytes are needed.
  auto read_line = [&](size_t max) -> bool {
    while (used < data.size()) {
      char c = data[used++];
      if (c == '\n') {
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        return true;
      }
      line_.push_back(c);
      if (line_.size() > max) return true;  // the caller sees the oversized line and fails
    }
    return false;
  };
  while (used < data.size() && status_ == Status::NeedMore && stage_ != Stage::Done) {
    switch (stage_) {
      case Stage::ChunkSize: {
        constexpr size_t kMaxLine = 1024;
        if (!read_line(kMaxLine)) return used;
        if (line_.size() > kMaxLine) {
          fail(400, "chunk-size line too long");
          return used;
        }
        std::string_view size_text = trim(std::string_view(line_).substr(0, line_.find(';')));
        if (size_text.empty() || size_text.size() > 15 || !std::all_of(size_text.begin(), size_text.end(), [](char c) {
              return std::isxdigit(static_cast<unsigned char>(c));
            })) {
          fail(400, "malformed chunk size");
          return used;
        }
        const uint64_t n = std::stoull(std::string(size_text), nullptr, 16);
        if (n > limits_.max_body_bytes - std::min(limits_.max_body_bytes, request_.body.size())) {
          fail(413, "the request body is larger than the server accepts");
          return used;
        }
        line_.clear();
        remaining_ = static_cast<size_t>(n);
        stage_ = n == 0 ? Stage::Trailers : Stage::ChunkData;
        break;
      }
      case Stage::ChunkData: {
        const size_t n = std::min(remaining_, data.size() - used);
        request_.body.append(data.data() + used, n);
        used += n;
        remaining_ -= n;
        if (remaining_ == 0) stage_ = Stage::ChunkDataEnd;
        break;
      }
      case Stage::ChunkDataEnd: {
        if (!read_line(2)) return used;
        if (!line_.empty()) {
          fail(400, "chunk data not followed by CRLF");
          return used;
        }
        stage_ = Stage::ChunkSize;
        break;
      }
      case Stage::Trailers: {
        const size_t start = used;
        const bool complete = read_line(limits_.max_head_bytes);
        trailer_bytes_ += used - start;
        if (trailer_bytes_ > limits_.max_head_bytes) {
          fail(431, "the chunked trailer is too large");
          return used;
        }
        if (!complete) return used;
        if (line_.empty()) stage_ = Stage::Done;  // trailer fields are read and ignored
        line_.clear();
        break;
      }
      default: return used;
    }
  }
  return used;
}

}  // namespace specserve::server
