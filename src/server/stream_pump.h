#pragma once
// Serving one request's output from its HTTP thread: as SSE (chunked, with heartbeats and
// disconnect detection → cancellation) or as one JSON body after the engine finishes.
#include <memory>

#include "engine/result_stream.h"
#include "server/http_counters.h"

namespace httplib {
struct Response;
}

namespace specserve::server {

// Output is ChatOutput or CompletionOutput (consume / finished / error / response).
template <typename Output>
void serve_sse(httplib::Response& res, std::shared_ptr<engine::ResultStream> stream, std::shared_ptr<Output> output,
               HttpCounters& counters, int heartbeat_ms);

// Blocks until the request finishes, then sends output->response() (or an error body).
template <typename Output>
void serve_blocking(httplib::Response& res, engine::ResultStream& stream, Output& output);

}  // namespace specserve::server
