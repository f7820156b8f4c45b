#include "server/stream_pump.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/completion_output.h"
#include "server/routes.h"
#include "server/sse.h"

namespace specserve::server {

namespace {
// The finish of a request that failed inside the engine, as an SSE error event.
std::string sse_error(const std::string& message) {
  return sse_data(error_body(ApiError(500, message, "server_error")));
}
}  // namespace

template <typename Output>
void serve_sse(httplib::Response& res, std::shared_ptr<engine::ResultStream> stream, std::shared_ptr<Output> output,
               HttpCounters& counters, int heartbeat_ms) {
  counters.open_streams.fetch_add(1);
  // The provider runs on this request's HTTP thread after the handler returns. It waits on the
  // result queue; a timeout writes a heartbeat comment, which is also how a client that went
  // away is noticed while nothing else is written (a write to a closed socket fails).
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream, output, &counters, heartbeat_ms](size_t, httplib::DataSink& sink) {
        std::vector<engine::StreamEvent> events;
        std::string buf;
        if (!stream->wait(events, std::chrono::milliseconds(heartbeat_ms))) {
          buf = sse_heartbeat();
        } else {
          std::vector<nlohmann::json> chunks;
          for (const auto& ev : events) output->consume(ev, &chunks);
          for (const auto& c : chunks) buf += sse_data(c);
          if (output->finished()) {
            if (output->error()) buf += sse_error(*output->error());
            buf += sse_done();
          }
        }
        // Events that release no text yet (a tag or stop-string prefix held back, a partial UTF-8
        // character) produce no chunk. Never write zero bytes: httplib 0.11.4 takes an empty write as
        // the end of the data and closes the response without its terminating chunk.
        if (buf.empty()) return true;
        if (!sink.is_writable() || !sink.write(buf.data(), buf.size())) {
          stream->cancel();  // frees the sequence at the scheduler's next step
          counters.client_disconnects.fetch_add(1);
          return false;
        }
        if (output->finished()) sink.done();
        return true;
      },
      [stream, &counters](bool success) {
        // Runs when the response is torn down: on any failure (disconnect, server stop, write
        // timeout) the engine must stop working for this request.
        if (!success) stream->cancel();
        counters.open_streams.fetch_sub(1);
      });
  res.set_header("X-Accel-Buffering", "no");
}

template <typename Output>
void serve_blocking(httplib::Response& res, engine::ResultStream& stream, Output& output) {
  std::vector<engine::StreamEvent> events;
  bool cancelled = false;
  while (!output.finished()) {
    events.clear();
    stream.wait(events, std::chrono::milliseconds(1000));
    for (const auto& ev : events) {
      output.consume(ev, nullptr);
      cancelled |= ev.finished && ev.finish_reason == engine::FinishReason::Cancelled;
    }
  }
  if (output.error()) throw ApiError(500, *output.error(), "server_error");
  // Only the server cancels a non-streaming request (shutdown or request timeout).
  if (cancelled) throw ApiError(503, "the request was cancelled (server shutting down or request timeout)", "service_unavailable");
  send_json(res, 200, output.response());
}

template void serve_sse<ChatOutput>(httplib::Response&, std::shared_ptr<engine::ResultStream>,
                                    std::shared_ptr<ChatOutput>, HttpCounters&, int);
template void serve_sse<CompletionOutput>(httplib::Response&, std::shared_ptr<engine::ResultStream>,
                                          std::shared_ptr<CompletionOutput>, HttpCounters&, int);
template void serve_blocking<ChatOutput>(httplib::Response&, engine::ResultStream&, ChatOutput&);
template void serve_blocking<CompletionOutput>(httplib::Response&, engine::ResultStream&, CompletionOutput&);

}  // namespace specserve::server
