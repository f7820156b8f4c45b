#pragma once
// HTTP-level counters for /metrics: responses by status code, open streams and connections,
// disconnects, refusals and timeouts.
#include <array>
#include <atomic>
#include <cstdint>

namespace specserve::server {

struct HttpCounters {
  std::array<std::atomic<uint64_t>, 600> responses_by_status{};
  std::atomic<int64_t> open_streams{0};
  std::atomic<uint64_t> client_disconnects{0};
  std::atomic<int64_t> open_connections{0};
  std::atomic<uint64_t> connections_refused{0};  // over --max-connections
  std::atomic<uint64_t> request_timeouts{0};     // 408: head or body too slow

  void count_status(int status) {
    if (status >= 100 && status < 600) responses_by_status[status].fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace specserve::server
