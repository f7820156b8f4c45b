#pragma once
// Moving engine output to the event loop without a thread per request. A PumpJob turns one
// request's ResultStream into bytes: SSE events while streaming, one JSON response otherwise. A
// single pump thread sleeps until a stream has output (each stream's ready hook wakes it: no
// polling interval is added to a token's latency), then polls every open job (each poll takes what
// the scheduler queued, never blocks) and hands the bytes to the event loop through `Deliver`; a
// streaming job silent for heartbeat_ms gets an SSE comment, whose write is also how a vanished
// client is noticed.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "engine/result_stream.h"
#include "server/http_counters.h"
#include "server/http_message.h"

namespace specserve::server {

class PumpJob {
 public:
  virtual ~PumpJob() = default;
  virtual bool streaming() const = 0;
  // Takes what the engine produced so far; streaming jobs append their SSE bytes to `out`.
  // Returns true once the request has finished (its final events are in `out`).
  virtual bool poll(std::string& out) = 0;
  // Non-streaming jobs, after poll() returned true: the response (200 with what was generated,
  // also when the server stopped the request: finish_reason "abort"; 500 on an engine error).
  virtual HttpResponse response() = 0;
  // The client went away: stop the engine work.
  virtual void cancel() = 0;
  // `wake` is called whenever the engine produced output for this job (any thread); empty to stop.
  virtual void set_wake(std::function<void()> wake) = 0;
};

// Output is ChatOutput or CompletionOutput. `keep_alive` holds whatever the output refers to.
template <typename Output>
std::shared_ptr<PumpJob> make_sse_job(std::shared_ptr<engine::ResultStream> stream, std::shared_ptr<Output> output);
template <typename Output>
std::shared_ptr<PumpJob> make_json_job(std::shared_ptr<engine::ResultStream> stream, std::shared_ptr<Output> output);

class StreamPump {
 public:
  // Called on the pump thread, in order per connection: bytes to write, whether the job finished,
  // and for a finished non-streaming job its response.
  using Deliver = std::function<void(uint64_t conn, std::string bytes, bool finished, std::optional<HttpResponse>)>;

  StreamPump(Deliver deliver, int heartbeat_ms, HttpCounters& counters);
  ~StreamPump();  // cancels the jobs still open
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  void add(uint64_t conn, std::shared_ptr<PumpJob> job);
  // The connection closed before its job finished: cancel it (counted as a client disconnect).
  void drop(uint64_t conn);
  size_t open_jobs() const;

 private:
  struct Entry {
    std::shared_ptr<PumpJob> job;
    std::chrono::steady_clock::time_point last_write;
  };
  // What the streams' ready hooks hold: it outlives the pump, so a hook that fires while the pump
  // is being destroyed touches nothing freed.
  struct Waker {
    std::mutex mutex;
    std::condition_variable cv;
    bool woken = false;
    bool stopping = false;
    void wake();
  };
  void run();
  // When the next heartbeat is due (a time far away when no stream is open). Takes mutex_.
  std::chrono::steady_clock::time_point next_heartbeat() const;
  void forget(Entry& e);  // detaches the job's wake hook and stream count; under mutex_
  bool stopping() const;

  Deliver deliver_;
  const std::chrono::milliseconds heartbeat_;
  HttpCounters& counters_;
  mutable std::mutex mutex_;  // guards jobs_
  std::unordered_map<uint64_t, Entry> jobs_;
  std::shared_ptr<Waker> waker_ = std::make_shared<Waker>();
  std::thread thread_;
};

}  // namespace specserve::server
