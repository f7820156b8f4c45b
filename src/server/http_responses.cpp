// HttpServer::Impl's responses: complete ones (head and body at once), streamed ones (SSE, chunked
// or until the close for HTTP/1.0), and what follows a response (the next request, or closing).
#include <event2/buffer.h>

#include <variant>

#include <fmt/format.h>

#include "core/log.h"
#include "server/api_error.h"
#include "server/http_server_impl.h"

namespace specserve::server {

HttpResponse HttpServer::Impl::transport_error(int status, const std::string& message, const std::string& code) {
  return error_response(ApiError(status, message, error_type_for_status(status), "", code));
}

void HttpServer::Impl::handled(Conn* c, RouteResult result) {
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

void HttpServer::Impl::on_delivered(uint64_t id, std::string bytes, bool finished,
                                    std::optional<HttpResponse> response) {
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
void HttpServer::Impl::send_response(Conn* c, HttpResponse r, bool counts_as_active, std::vector<HttpHeader> extra) {
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

void HttpServer::Impl::response_done(Conn* c, bool close) {
  if (close) {
    begin_closing(c);  // counts the unwritten output (flushing_) before the response stops counting
    active_responses_.fetch_sub(1);
    return;
  }
  active_responses_.fetch_sub(1);
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

}  // namespace specserve::server
