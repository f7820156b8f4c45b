// HttpServer::Impl's connections: accepting (with the connection cap), reading and parsing requests,
// the header / body / keep-alive / linger timeouts, and closing.
#include <event2/buffer.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "server/http_server_impl.h"

namespace specserve::server {

namespace {

// Bytes read ahead of the request being served (pipelined requests) before reading pauses.
constexpr size_t kMaxBufferedInput = 64 * 1024;
// How long a closing connection may take to read the client's remaining bytes after our last
// byte went out (so an early answer such as 413 is not destroyed by a TCP reset).
constexpr int kLingerSeconds = 2;
// Refused connections (over the cap) still being answered, beyond which a new one is just closed.
constexpr size_t kRefusalsInFlight = 64;

}  // namespace

// --- accepting ---
void HttpServer::Impl::on_accept(evconnlistener*, evutil_socket_t fd, sockaddr*, int, void* arg) {
  static_cast<Impl*>(arg)->accept(fd);
}

void HttpServer::Impl::accept(evutil_socket_t fd) {
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

void HttpServer::Impl::arm(Conn* c, int seconds) {
  timeval tv{std::max(seconds, 0), seconds > 0 ? 0 : 1000};
  evtimer_add(c->timer, &tv);
}

// --- reading and parsing ---
void HttpServer::Impl::on_read(bufferevent*, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  c->server->readable(c);
}

void HttpServer::Impl::readable(Conn* c) {
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

// No more requests are parsed; once the output is written the write side is shut and what the
// client still sends is read and discarded for a while (so it receives our answer, not a reset).
void HttpServer::Impl::begin_closing(Conn* c) {
  c->state = State::Closing;
  evtimer_del(c->timer);
  evbuffer* in = bufferevent_get_input(c->bev);
  evbuffer_drain(in, evbuffer_get_length(in));
  bufferevent_enable(c->bev, EV_READ);
  if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
    shut_write(c);
  } else if (!c->flushing) {
    c->flushing = true;  // stop() waits for these bytes (within its flush limit)
    flushing_.fetch_add(1);
  }
}

void HttpServer::Impl::shut_write(Conn* c) {
  if (c->shut_wr) return;
  c->shut_wr = true;
  if (c->flushing) {
    c->flushing = false;
    flushing_.fetch_sub(1);
  }
  ::shutdown(bufferevent_getfd(c->bev), SHUT_WR);
  arm(c, kLingerSeconds);
}

void HttpServer::Impl::on_write(bufferevent*, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  if (c->state == State::Closing) c->server->shut_write(c);
}

void HttpServer::Impl::on_event(bufferevent*, short what, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) c->server->close_now(c);
}

void HttpServer::Impl::on_timer(evutil_socket_t, short, void* arg) {
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
void HttpServer::Impl::close_now(Conn* c) {
  if (c->state == State::Handling || c->state == State::Streaming) {
    pump_->drop(c->id);
    active_responses_.fetch_sub(1);
  }
  if (c->refused) --refusing_;
  if (c->flushing) flushing_.fetch_sub(1);
  evtimer_del(c->timer);
  event_free(c->timer);
  bufferevent_free(c->bev);
  conns_.erase(c->id);
  open_count_.store(conns_.size());
  counters_.open_connections.store(static_cast<int64_t>(conns_.size()));
}

}  // namespace specserve::server
