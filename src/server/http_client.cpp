#include "server/http_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace specserve::server {

namespace {

class Socket {
 public:
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Connects to host:port; "" on success, else why not.
  std::string connect(const std::string& host, int port, int timeout_s) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
      return "cannot resolve " + host;
    for (addrinfo* a = found; a && fd_ < 0; a = a->ai_next) {
      fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd_ < 0) continue;
      timeval tv{timeout_s, 0};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      if (::connect(fd_, a->ai_addr, a->ai_addrlen) != 0) {
        ::close(fd_);
        fd_ = -1;
      }
    }
    freeaddrinfo(found);
    return fd_ < 0 ? "connection refused or timed out" : "";
  }
  bool send_all(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // Appends what arrives to `buf`; false at the end of the stream or on an error / timeout.
  bool receive(std::string& buf) {
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

HttpClientResponse http_fetch(const std::string& host, int port, const HttpClientRequest& request, int timeout_s,
                              const std::function<bool(const char*, size_t)>& on_body) {
  HttpClientResponse res;
  Socket sock;
  if (std::string why = sock.connect(host, port, timeout_s); !why.empty()) {
    res.error = why;
    return res;
  }
  std::string out = request.method + " " + request.path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                    "\r\nConnection: close\r\n";
  for (const auto& [name, value] : request.headers) out += name + ": " + value + "\r\n";
  if (!request.body.empty() || request.method == "POST")
    out += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  out += "\r\n" + request.body;
  if (!sock.send_all(out)) {
    res.error = "send failed";
    return res;
  }

  std::string buf;
  size_t head_end;
  while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > 64 * 1024 || !sock.receive(buf)) {
      res.error = "no response head";
      return res;
    }
  }
  const std::string head = buf.substr(0, head_end);
  buf.erase(0, head_end + 4);
  if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) {
    res.error = "malformed response";
    return res;
  }
  res.status = std::atoi(head.c_str() + 9);
  bool chunked = false;
  long long length = -1;
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos < head.size()) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string line = head.substr(pos + 2, (next == std::string::npos ? head.size() : next) - pos - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      const std::string name = lower(line.substr(0, colon));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos) chunked = true;
      if (name == "content-length") length = std::atoll(value.c_str());
    }
    pos = next;
  }

  bool keep_reading = true;
  const bool streamed = on_body && res.status >= 200 && res.status < 300;
  auto deliver = [&](const char* data, size_t n) {
    if (n == 0 || !keep_reading) return;
    if (streamed)
      keep_reading = on_body(data, n);
    else
      res.body.append(data, n);
  };
  if (!chunked) {
    // Content-Length, or until the server closes (Connection: close).
    size_t got = 0;
    for (;;) {
      size_t take = length >= 0 ? std::min(buf.size(), static_cast<size_t>(length) - got) : buf.size();
      deliver(buf.data(), take);
      got += take;
      buf.clear();
      if (!keep_reading || (length >= 0 && got >= static_cast<size_t>(length))) return res;
      if (!sock.receive(buf)) {
        if (length >= 0) res.error = "connection closed before the end of the body";
        return res;
      }
    }
  }
  for (;;) {
    size_t line_end;
    while ((line_end = buf.find("\r\n")) == std::string::npos) {
      if (!sock.receive(buf)) {
        res.error = "connection closed inside a chunked body";
        return res;
      }
    }
    const size_t size = std::strtoul(buf.c_str(), nullptr, 16);
    buf.erase(0, line_end + 2);
    if (size == 0) return res;
    while (buf.size() < size + 2) {
      if (!sock.receive(buf)) {
        res.error = "connection closed inside a chunk";
        return res;
      }
    }
    deliver(buf.data(), size);
    buf.erase(0, size + 2);
    if (!keep_reading) return res;
  }
}

}  // namespace specserve::server
