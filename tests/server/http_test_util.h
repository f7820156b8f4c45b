#pragma once
// Helpers for HTTP-level tests: SSE parsing, raw sockets (for truncated requests and abrupt
// disconnects), and polling.
#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace specserve::test {

// The JSON payloads of "data: {...}" events, in order; `done` tells whether "data: [DONE]" came.
struct SseParse {
  std::vector<nlohmann::json> events;
  bool done = false;
  bool valid = true;  // every data line was JSON or [DONE]
};

inline SseParse parse_sse(const std::string& body) {
  SseParse out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.empty() || event[0] == ':') continue;
    if (event.rfind("data: ", 0) != 0) {
      out.valid = false;
      continue;
    }
    std::string data = event.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    auto j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded())
      out.valid = false;
    else
      out.events.push_back(std::move(j));
  }
  return out;
}

// A blocking TCP connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(int port, int recv_timeout_s = 10) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{recv_timeout_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConnection() { close(); }
  bool ok() const { return ok_; }
  // False when the peer closed or reset the connection before everything was sent.
  bool send_all(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // Whether bytes (or the peer's close) are waiting to be read, waiting up to `ms`.
  bool readable(int ms = 0) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }
  // True once a read saw the peer's orderly close (as opposed to the receive timeout).
  bool peer_closed() const { return peer_closed_; }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Reads until `needle` appears, the peer closes, or the receive timeout hits.
  std::string read_until(const std::string& needle) {
    std::string got;
    char buf[65536];
    // Only the bytes that arrived last (and the needle's length before them) are searched again.
    for (size_t searched = 0; got.find(needle, searched) == std::string::npos;) {
      searched = got.size() >= needle.size() ? got.size() - needle.size() + 1 : 0;
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) peer_closed_ = true;
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  std::string read_all() { return read_until(std::string(1, '\0') + "never"); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  bool peer_closed_ = false;
};

// How many HTTP responses a raw byte stream holds ("HTTP/1.1 " and a 3-digit status; the tests'
// bodies never contain that).
inline int count_responses(const std::string& bytes) {
  int n = 0;
  for (size_t pos = 0; (pos = bytes.find("HTTP/1.1 ", pos)) != std::string::npos; pos += 9)
    if (pos + 12 <= bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[pos + 9])) &&
        std::isdigit(static_cast<unsigned char>(bytes[pos + 10])) &&
        std::isdigit(static_cast<unsigned char>(bytes[pos + 11])))
      ++n;
  return n;
}

// Resident memory of this process in MiB (VmRSS), or 0 when unknown.
inline double rss_mib(pid_t pid = 0) {
  std::string path = pid ? "/proc/" + std::to_string(pid) + "/status" : "/proc/self/status";
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (fgets(line, sizeof(line), f))
    if (std::sscanf(line, "VmRSS: %lf kB", &kib) == 1) break;
  fclose(f);
  return kib / 1024;
}

// The status code of a raw HTTP response ("HTTP/1.1 400 Bad Request" → 400), or 0.
inline int raw_status(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.substr(9, 3).c_str());
}

inline bool wait_for(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// The error object of an OpenAI-shaped error body, or null when the body is not one.
inline nlohmann::json error_of(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j["error"].is_object()) return nullptr;
  const auto& e = j["error"];
  if (!e.contains("message") || !e["message"].is_string() || !e.contains("type") || !e.contains("param") ||
      !e.contains("code")) {
    return nullptr;
  }
  return e;
}

}  // namespace specserve::test
