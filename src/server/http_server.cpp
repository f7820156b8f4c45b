// HttpServer's event loop: its life (binding, start, shutdown, stop), posting work onto it from other
// threads, and the public HttpServer calls that forward to it.
#include "server/http_server.h"

#include <event2/buffer.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "server/http_server_impl.h"

namespace specserve::server {

int http_pool_size(const ServerOptions& o) { return o.http_threads > 0 ? o.http_threads : 4; }

namespace {

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

HttpServer::Impl::Impl(ServerOptions options, std::shared_ptr<ServingState> state)
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

HttpServer::Impl::~Impl() {
  stop(0);
  if (listener_) evconnlistener_free(listener_);
  if (wake_) event_free(wake_);
  if (base_) event_base_free(base_);
}

int HttpServer::Impl::bind() {
  raise_open_file_limit();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options_.port);
  if (getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
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

void HttpServer::Impl::start() {
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

void HttpServer::Impl::begin_shutdown() {
  if (draining_.exchange(true)) return;
  post([this] { on_shutdown(); });
}

void HttpServer::Impl::stop(int flush_ms) {
  if (!running_) return;
  begin_shutdown();
  // The responses still being produced end, and what they queued is written out to the clients,
  // within the flush limit: closing a connection frees its unwritten output.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(flush_ms);
  while ((!shutdown_begun_.load() || active_responses_.load() > 0 || flushing_.load() > 0) &&
         std::chrono::steady_clock::now() < deadline)
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

void HttpServer::Impl::post(std::function<void()> fn) {
  std::lock_guard lock(post_mutex_);
  if (stopped_) return;
  posted_.push_back(std::move(fn));
  event_active(wake_, EV_TIMEOUT, 0);
}

void HttpServer::Impl::on_wake(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<Impl*>(arg);
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(self->post_mutex_);
    batch.swap(self->posted_);
  }
  for (auto& fn : batch) fn();
}

void HttpServer::Impl::on_shutdown() {
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
  // Idle keep-alive and half-received requests close now; one whose previous response is still
  // being written out closes after it.
  for (Conn* c : reading) {
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
      begin_closing(c);
    else
      close_now(c);
  }
  shutdown_begun_.store(true);
}

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
