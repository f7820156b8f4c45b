#include "server/http_server.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"
#include "server/api_error.h"
#include "server/http_request_parser.h"
#include "server/routes.h"
#include "server/sse.h"
#include "server/stream_pump.h"
#include "server/worker_pool.h"

namespace specserve::server {

int http_pool_size(const ServerOptions& o) { return o.http_threads > 0 ? o.http_threads : 4; }

namespace {

// Bytes read ahead of the request being served (pipelined requests) before reading pauses.
constexpr size_t kMaxBufferedInput = 64 * 1024;
// How long a closing connection may take to read the client's remaining bytes after our last
// byte went out (so an early answer such as 413 is not destroyed by a TCP reset).
constexpr int kLingerSeconds = 2;
// Refused connections (over the cap) still being answered, beyond which a new one is just closed.
constexpr size_t kRefusalsInFlight = 64;

bool needs_auth(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// Constant-time comparison, so response timing does not reveal a key prefix.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}

// "Authorization: Bearer <key>" with the scheme matched case-insensitively (RFC 7235 §2.1).
bool bearer_matches(const std::string* auth, const std::string& key) {
  if (!auth || auth->size() < 7) return false;
  std::string scheme = auth->substr(0, 6);
  for (char& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (scheme != "bearer" || ((*auth)[6] != ' ' && (*auth)[6] != '\t')) return false;
  size_t start = 7;
  while (start < auth->size() && ((*auth)[start] == ' ' || (*auth)[start] == '\t')) ++start;
  return same_secret(auth->substr(start), key);
}

HttpResponse transport_error(int status, const std::string& message, const std::string& code = "") {
  return error_response(ApiError(status, message, error_type_for_status(status), "", code));
}

void raise_open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

size_t open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1u << 20;
  return static_cast<size_t>(rl.rlim_cur);
}

// The key's first line, surrounding whitespace trimmed; an unreadable or empty file is an error.
std::string read_api_key_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) fail("cannot read the API key file {}", path);
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) fail("the API key file {} is empty", path);
  return line.substr(first, last - first + 1);
}

void use_pthreads_once() {
  static std::once_flag once;
  std::call_once(once, [] { evthread_use_pthreads(); });
}

}  // namespace

class HttpServer::Impl {
 public:
  enum class State { Reading, Handling, Streaming, Closing };
  struct Conn {
    uint64_t id = 0;
    Impl* server = nullptr;
    bufferevent* bev = nullptr;
    event* timer = nullptr;
    HttpRequestParser parser;
    State state = State::Reading;
    bool keep_alive = true;  // of the request being served
    bool http10 = false;
    bool shut_wr = false;
    bool refused = false;          // over the connection cap: answered 503 and closing
    std::vector<HttpHeader> cors;  // headers every response to this request carries
    explicit Conn(HttpLimits limits) : parser(limits) {}
  };

  Impl(ServerOptions options, std::shared_ptr<ServingState> state)
      : options_(std::move(options)), state_(std::move(state)), ctx_{options_, *state_, counters_} {
    if (!options_.api_key_file.empty()) options_.api_key = read_api_key_file(options_.api_key_file);
    use_pthreads_once();
    base_ = event_base_new();
    SS_CHECK(base_ != nullptr, "cannot create the event loop");
    wake_ = event_new(base_, -1, 0, &Impl::on_wake, this);
    limits_.max_body_bytes = options_.max_body_bytes;
    limits_.max_head_bytes = options_.max_header_bytes;
    limits_.max_headers = options_.max_headers;
    register_info_routes(router_, ctx_);
    register_generate_routes(router_, ctx_);
    register_tokenize_routes(router_, ctx_);
  }

  ~Impl() {
    stop(0);
    if (listener_) evconnlistener_free(listener_);
    if (wake_) event_free(wake_);
    if (base_) event_base_free(base_);
  }

  int bind() {
    raise_open_file_limit();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(options_.port);
    if (getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), port.c_str(), &hints, &found) != 0 ||
        !found)
      fail("cannot listen on {}:{} (unknown address)", options_.host, options_.port);
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    freeaddrinfo(found);
    if (fd < 0) fail("cannot listen on {}:{} (address in use or not available)", options_.host, options_.port);
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    listener_ = evconnlistener_new(base_, &Impl::on_accept, this, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    SS_CHECK(listener_ != nullptr, "cannot watch the listening socket");
    // The cap leaves room under the process's open-file limit for model files and the like.
    const size_t fd_room = open_file_limit() > 64 ? open_file_limit() - 64 : 16;
    cap_ = std::min<size_t>(static_cast<size_t>(std::max(1, options_.max_connections)), fd_room);
    return port_;
  }

  void start() {
    SS_CHECK(listener_ != nullptr, "HttpServer::start() before bind()");
    pump_ = std::make_unique<StreamPump>(
        [this](uint64_t id, std::string bytes, bool finished, std::optional<HttpResponse> response) {
          post([this, id, bytes = std::move(bytes), finished, response = std::move(response)]() mutable {
            on_delivered(id, std::move(bytes), finished, std::move(response));
          });
        },
        options_.heartbeat_ms, counters_);
    workers_ = std::make_unique<WorkerPool>(http_pool_size(options_));
    running_ = true;
    thread_ = std::thread([this] { event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY); });
  }

  void begin_shutdown() {
    if (draining_.exchange(true)) return;
    post([this] { on_shutdown(); });
  }

  void stop(int flush_ms) {
    if (!running_) return;
    begin_shutdown();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(flush_ms);
    while (active_responses_.load() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // Every connection still open is closed on the loop, which then exits (after running the
    // finalizers that close the sockets).
    post([this] {
      std::vector<Conn*> all;
      for (auto& [id, c] : conns_) all.push_back(c.get());
      for (Conn* c : all) close_now(c);
      if (listener_) evconnlistener_free(listener_);
      listener_ = nullptr;
      event_base_loopexit(base_, nullptr);
    });
    thread_.join();
    event_base_loop(base_, EVLOOP_NONBLOCK);  // finalizers queued by the last callbacks
    {
      std::lock_guard lock(post_mutex_);
      stopped_ = true;  // late posts from handler threads or the pump are dropped
      posted_.clear();
    }
    pump_.reset();     // cancels the jobs still open
    workers_.reset();  // finishes the handlers in progress (their results are dropped)
    running_ = false;
  }

  bool running() const { return running_; }
  size_t open_connections() const { return open_count_.load(); }

  ServerOptions options_;
  HttpCounters counters_;

 private:
  // --- cross-thread posting onto the loop ---
  void post(std::function<void()> fn) {
    std::lock_guard lock(post_mutex_);
    if (stopped_) return;
    posted_.push_back(std::move(fn));
    event_active(wake_, EV_TIMEOUT, 0);
  }
  static void on_wake(evutil_socket_t, short, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard lock(self->post_mutex_);
      batch.swap(self->posted_);
    }
    for (auto& fn : batch) fn();
  }

  // --- accepting ---
  static void on_accept(evconnlistener*, evutil_socket_t fd, sockaddr*, int, void* arg) {
    static_cast<Impl*>(arg)->accept(fd);
  }

  void accept(evutil_socket_t fd) {
    const bool over_cap = conns_.size() - refusing_ >= cap_;
    if (over_cap && refusing_ >= kRefusalsInFlight) {
      ::close(fd);
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // SSE chunks are small and latency-sensitive
    auto conn = std::make_unique<Conn>(limits_);
    Conn* c = conn.get();
    c->id = next_id_++;
    c->server = this;
    c->bev = bufferevent_socket_new(base_, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->bev) {
      ::close(fd);
      return;
    }
    c->timer = evtimer_new(base_, &Impl::on_timer, c);
    bufferevent_setcb(c->bev, &Impl::on_read, &Impl::on_write, &Impl::on_event, c);
    timeval wt{options_.write_timeout_s, 0};
    bufferevent_set_timeouts(c->bev, nullptr, &wt);
    bufferevent_setwatermark(c->bev, EV_READ, 0, kMaxBufferedInput);
    bufferevent_enable(c->bev, EV_READ);
    conns_.emplace(c->id, std::move(conn));
    open_count_.store(conns_.size());
    counters_.open_connections.store(static_cast<int64_t>(conns_.size()));
    if (over_cap) {
      // A clear refusal rather than a silent close or an unanswered socket.
      ++refusing_;
      counters_.connections_refused.fetch_add(1);
      c->refused = true;
      c->keep_alive = false;
      send_response(c,
                    transport_error(503,
                                    fmt::format("the server has too many open connections (limit {}); retry "
                                                "later",
                                                cap_),
                                    "too_many_connections"),
                    /*counts_as_active=*/false, {{"Retry-After", "1"}});
      return;
    }
    // The first request's head must arrive within the header timeout of the accept.
    arm(c, options_.header_timeout_s);
  }

  void arm(Conn* c, int seconds) {
    timeval tv{std::max(seconds, 0), seconds > 0 ? 0 : 1000};
    evtimer_add(c->timer, &tv);
  }

  // --- reading and parsing ---
  static void on_read(bufferevent*, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    c->server->readable(c);
  }

  void readable(Conn* c) {
    evbuffer* in = bufferevent_get_input(c->bev);
    if (c->state == State::Closing) {
      evbuffer_drain(in, evbuffer_get_length(in));
      return;
    }
    while (c->state == State::Reading && evbuffer_get_length(in) > 0) {
      const bool was_started = c->parser.started(), had_head = c->parser.head_complete();
      evbuffer_iovec v{};
      if (evbuffer_peek(in, -1, nullptr, &v, 1) < 1) break;
      const size_t used = c->parser.feed(std::string_view(static_cast<const char*>(v.iov_base), v.iov_len));
      evbuffer_drain(in, used);
      const auto status = c->parser.status();
      if (status == HttpRequestParser::Status::Failed) {
        c->keep_alive = false;  // where this request ends is unknown: never parse the rest
        send_response(c, transport_error(c->parser.error_status(), c->parser.error_message()));
        return;
      }
      if (status == HttpRequestParser::Status::Complete) {
        dispatch(c, c->parser.take());
        continue;  // pipelined requests wait until this one is answered
      }
      // A new request's head must complete within the header timeout of its first byte, and
      // its body within the read timeout after the head, however slowly the bytes trickle in.
      if (!was_started && c->parser.started()) arm(c, options_.header_timeout_s);
      if (!had_head && c->parser.head_complete()) {
        arm(c, options_.read_timeout_s);
        // curl and others wait (about a second) for this before sending a larger body.
        if (c->parser.expects_continue()) bufferevent_write(c->bev, "HTTP/1.1 100 Continue\r\n\r\n", 25);
      }
      if (used == 0) break;
    }
  }

  // --- routing ---
  std::vector<HttpHeader> cors_headers(const HttpRequest& req) const {
    const auto& allowed = options_.allowed_origins;
    const std::string* origin = req.header("origin");
    if (allowed.empty() || !origin) return {};
    if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return {{"Access-Control-Allow-Origin", "*"}};
    if (std::find(allowed.begin(), allowed.end(), *origin) != allowed.end())
      return {{"Access-Control-Allow-Origin", *origin}, {"Vary", "Origin"}};
    return {};
  }

  void dispatch(Conn* c, HttpRequest req) {
    evtimer_del(c->timer);
    c->state = State::Handling;
    c->keep_alive = req.keep_alive;
    c->http10 = req.version_minor == 0;
    c->cors = cors_headers(req);
    active_responses_.fetch_add(1);
    SS_LOG_DEBUG("http", "{} {}", req.method, req.target);

    if (req.method == "OPTIONS" && !c->cors.empty()) {  // CORS preflight
      HttpResponse r;
      r.status = 204;
      r.content_type.clear();
      const std::string* asked = req.header("access-control-request-headers");
      r.headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                   {"Access-Control-Allow-Headers", asked ? *asked : "Authorization, Content-Type"},
                   {"Access-Control-Max-Age", "600"}};
      send_response(c, std::move(r));
      return;
    }
    Router::Match m = router_.match(req.method, req.path);
    if (!m.route) {
      if (m.allow.empty()) {
        send_response(c, transport_error(404, fmt::format("no such endpoint: {} {}", req.method, req.path)));
      } else {
        send_response(
            c,
            transport_error(405, fmt::format("{} is not allowed on {} (allowed: {})", req.method, req.path, m.allow)),
            true, {{"Allow", m.allow}});
      }
      return;
    }
    if (!options_.api_key.empty() && needs_auth(req.path) &&
        !bearer_matches(req.header("authorization"), options_.api_key)) {
      send_response(c,
                    error_response(ApiError(401, "Invalid or missing API key (expected 'Authorization: Bearer <key>')",
                                            "authentication_error", "", "invalid_api_key")),
                    true, {{"WWW-Authenticate", "Bearer"}});
      return;
    }
    const Route* route = m.route;
    if (route->on_event_loop) {
      handled(c, run_handler(*route, req));
      return;
    }
    auto shared = std::make_shared<HttpRequest>(std::move(req));
    workers_->submit([this, id = c->id, route, shared] {
      RouteResult result = run_handler(*route, *shared);
      post([this, id, result = std::move(result)]() mutable {
        auto it = conns_.find(id);
        if (it == conns_.end()) {
          // The client left while the handler ran: nobody will read this output.
          if (auto* job = std::get_if<std::shared_ptr<PumpJob>>(&result)) (*job)->cancel();
          return;
        }
        handled(it->second.get(), std::move(result));
      });
    });
  }

  static RouteResult run_handler(const Route& route, const HttpRequest& req) {
    try {
      return route.handler(req);
    } catch (const std::exception& e) {
      return internal_error_response(e);
    }
  }

  void handled(Conn* c, RouteResult result) {
    if (auto* r = std::get_if<HttpResponse>(&result)) {
      send_response(c, std::move(*r));
      return;
    }
    auto job = std::get<std::shared_ptr<PumpJob>>(std::move(result));
    if (job->streaming()) {
      if (draining_) c->keep_alive = false;
      std::string head =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
          "X-Accel-Buffering: no\r\n";
      for (const auto& h : c->cors) head += h.name + ": " + h.value + "\r\n";
      if (c->http10) {
        c->keep_alive = false;  // the end of the stream is the end of the connection
        head += "Connection: close\r\n";
      } else {
        head += "Transfer-Encoding: chunked\r\n";
        if (!c->keep_alive) head += "Connection: close\r\n";
      }
      head += "\r\n";
      bufferevent_write(c->bev, head.data(), head.size());
      counters_.count_status(200);
      c->state = State::Streaming;
    }
    pump_->add(c->id, std::move(job));
  }

  // --- writing ---
  void on_delivered(uint64_t id, std::string bytes, bool finished, std::optional<HttpResponse> response) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn* c = it->second.get();
    if (c->state == State::Streaming) {
      if (!bytes.empty()) {
        if (c->http10) {
          bufferevent_write(c->bev, bytes.data(), bytes.size());
        } else {
          std::string chunk = fmt::format("{:x}\r\n", bytes.size());
          chunk += bytes;
          chunk += "\r\n";
          bufferevent_write(c->bev, chunk.data(), chunk.size());
        }
      }
      if (finished) {
        if (!c->http10) bufferevent_write(c->bev, "0\r\n\r\n", 5);
        response_done(c, !c->keep_alive || draining_);
      }
      return;
    }
    if (c->state == State::Handling && finished && response) send_response(c, std::move(*response));
  }

  // Writes a complete response; `extra` headers go after the handler's. Transport errors (the
  // parser's statuses) and `keep_alive == false` close the connection after it.
  void send_response(Conn* c, HttpResponse r, bool counts_as_active = true, std::vector<HttpHeader> extra = {}) {
    const bool close = !c->keep_alive || draining_.load();
    std::string head = fmt::format("HTTP/1.1 {} {}\r\n", r.status, http_reason_phrase(r.status));
    if (!r.content_type.empty()) head += "Content-Type: " + r.content_type + "\r\n";
    if (r.status != 204) head += fmt::format("Content-Length: {}\r\n", r.body.size());
    head += "Cache-Control: no-cache\r\n";
    for (const auto& h : r.headers) head += h.name + ": " + h.value + "\r\n";
    for (const auto& h : extra) head += h.name + ": " + h.value + "\r\n";
    for (const auto& h : c->cors) head += h.name + ": " + h.value + "\r\n";
    if (close)
      head += "Connection: close\r\n";
    else if (c->http10)
      head += "Connection: keep-alive\r\n";
    head += "\r\n";
    evbuffer* out = bufferevent_get_output(c->bev);
    evbuffer_add(out, head.data(), head.size());
    evbuffer_add(out, r.body.data(), r.body.size());
    counters_.count_status(r.status);
    SS_LOG_DEBUG("http", "-> {}", r.status);
    if (!counts_as_active) {
      begin_closing(c);
      return;
    }
    response_done(c, close);
  }

  void response_done(Conn* c, bool close) {
    active_responses_.fetch_sub(1);
    if (close) {
      begin_closing(c);
      return;
    }
    c->state = State::Reading;
    arm(c, options_.keep_alive_timeout_s);
    // Bytes of a pipelined request may be waiting; parse them on the next loop turn.
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0) {
      post([this, id = c->id] {
        auto it = conns_.find(id);
        if (it != conns_.end()) readable(it->second.get());
      });
    }
  }

  // No more requests are parsed; once the output is written the write side is shut and what the
  // client still sends is read and discarded for a while (so it receives our answer, not a reset).
  void begin_closing(Conn* c) {
    c->state = State::Closing;
    evtimer_del(c->timer);
    evbuffer* in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    bufferevent_enable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) shut_write(c);
  }

  void shut_write(Conn* c) {
    if (c->shut_wr) return;
    c->shut_wr = true;
    ::shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    arm(c, kLingerSeconds);
  }

  static void on_write(bufferevent*, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    if (c->state == State::Closing) c->server->shut_write(c);
  }

  static void on_event(bufferevent*, short what, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) c->server->close_now(c);
  }

  static void on_timer(evutil_socket_t, short, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    Impl* self = c->server;
    if (c->state == State::Reading && c->parser.started()) {
      // A head or body that did not arrive in time.
      c->keep_alive = false;
      self->counters_.request_timeouts.fetch_add(1);
      self->active_responses_.fetch_add(1);
      self->send_response(
          c, transport_error(408, c->parser.head_complete() ? "the request body was not received in time"
                                                            : "the request header was not received in time"));
      return;
    }
    self->close_now(c);  // idle keep-alive, a silent new connection, or the end of a linger
  }

  // Frees the connection at once (its fd closes); an unfinished request is cancelled.
  void close_now(Conn* c) {
    if (c->state == State::Handling || c->state == State::Streaming) {
      pump_->drop(c->id);
      active_responses_.fetch_sub(1);
    }
    if (c->refused) --refusing_;
    evtimer_del(c->timer);
    event_free(c->timer);
    bufferevent_free(c->bev);
    conns_.erase(c->id);
    open_count_.store(conns_.size());
    counters_.open_connections.store(static_cast<int64_t>(conns_.size()));
  }

  void on_shutdown() {
    if (listener_) {
      evconnlistener_free(listener_);  // closes the listening socket: new connections are refused
      listener_ = nullptr;
    }
    std::vector<Conn*> reading;
    for (auto& [id, c] : conns_) {
      if (c->state == State::Reading)
        reading.push_back(c.get());
      else
        c->keep_alive = false;  // the response being served is the last
    }
    for (Conn* c : reading) close_now(c);  // idle keep-alive and half-received requests
  }

  std::shared_ptr<ServingState> state_;
  RouteContext ctx_;
  Router router_;
  HttpLimits limits_;
  event_base* base_ = nullptr;
  event* wake_ = nullptr;
  evconnlistener* listener_ = nullptr;
  int port_ = -1;
  size_t cap_ = 1;
  size_t refusing_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::atomic<size_t> open_count_{0};
  std::atomic<int> active_responses_{0};
  std::atomic<bool> draining_{false};
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex post_mutex_;
  std::vector<std::function<void()>> posted_;
  bool stopped_ = false;
  std::unique_ptr<StreamPump> pump_;
  std::unique_ptr<WorkerPool> workers_;
};

HttpServer::HttpServer(ServerOptions options, std::shared_ptr<ServingState> state)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(state))) {}
HttpServer::~HttpServer() { impl_->stop(0); }
int HttpServer::bind() { return impl_->bind(); }
void HttpServer::start() { impl_->start(); }
void HttpServer::begin_shutdown() { impl_->begin_shutdown(); }
void HttpServer::stop(int flush_ms) { impl_->stop(flush_ms); }
bool HttpServer::running() const { return impl_->running(); }
const ServerOptions& HttpServer::options() const { return impl_->options_; }
HttpCounters& HttpServer::counters() { return impl_->counters_; }
size_t HttpServer::open_connections() const { return impl_->open_connections(); }

}  // namespace specserve::server
