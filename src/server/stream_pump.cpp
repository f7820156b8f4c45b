#include "server/stream_pump.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/completion_output.h"
#include "server/sse.h"

namespace specserve::server {

namespace {

// The finish of a request that failed inside the engine, as an SSE error event.
std::string sse_error(const std::string& message) {
  return sse_data(error_body(ApiError(500, message, "server_error")));
}

// What both kinds of job share: the request's stream, its output builder, and the events of a poll.
template <typename Output>
class StreamJob : public PumpJob {
 public:
  StreamJob(std::shared_ptr<engine::ResultStream> s, std::shared_ptr<Output> o)
      : stream_(std::move(s)), output_(std::move(o)) {}
  void cancel() override { stream_->cancel(); }
  void set_wake(std::function<void()> wake) override { stream_->set_ready_hook(std::move(wake)); }

 protected:
  // Feeds what the engine queued since the last poll to the output (SSE chunks into `chunks` when
  // given). False when nothing was queued.
  bool consume_queued(std::vector<nlohmann::json>* chunks) {
    events_.clear();
    if (!stream_->wait(events_, std::chrono::milliseconds(0))) return false;
    for (const auto& ev : events_) output_->consume(ev, chunks);
    return true;
  }
  std::shared_ptr<engine::ResultStream> stream_;
  std::shared_ptr<Output> output_;

 private:
  std::vector<engine::StreamEvent> events_;
};

template <typename Output>
class SseJob : public StreamJob<Output> {
 public:
  using StreamJob<Output>::StreamJob;
  bool streaming() const override { return true; }
  bool poll(std::string& out) override {
    std::vector<nlohmann::json> chunks;
    if (!this->consume_queued(&chunks)) return false;
    for (const auto& c : chunks) out += sse_data(c);
    if (!this->output_->finished()) return false;
    if (this->output_->error()) out += sse_error(*this->output_->error());
    out += sse_done();
    return true;
  }
  HttpResponse response() override { return {}; }
};

template <typename Output>
class JsonJob : public StreamJob<Output> {
 public:
  using StreamJob<Output>::StreamJob;
  bool streaming() const override { return false; }
  bool poll(std::string&) override { return this->consume_queued(nullptr) && this->output_->finished(); }
  HttpResponse response() override {
    HttpResponse r;
    if (this->output_->error()) {
      r.status = 500;
      r.body = dump_json(error_body(ApiError(500, *this->output_->error(), "server_error")));
    } else {
      // A request the server stopped (request timeout, shutdown) returns what it generated with
      // finish_reason "abort" rather than a retryable error that would run it again.
      r.body = dump_json(this->output_->response());
    }
    return r;
  }
};

}  // namespace

template <typename Output>
std::shared_ptr<PumpJob> make_sse_job(std::shared_ptr<engine::ResultStream> stream, std::shared_ptr<Output> output) {
  return std::make_shared<SseJob<Output>>(std::move(stream), std::move(output));
}
template <typename Output>
std::shared_ptr<PumpJob> make_json_job(std::shared_ptr<engine::ResultStream> stream, std::shared_ptr<Output> output) {
  return std::make_shared<JsonJob<Output>>(std::move(stream), std::move(output));
}
template std::shared_ptr<PumpJob> make_sse_job<ChatOutput>(std::shared_ptr<engine::ResultStream>,
                                                           std::shared_ptr<ChatOutput>);
template std::shared_ptr<PumpJob> make_sse_job<CompletionOutput>(std::shared_ptr<engine::ResultStream>,
                                                                 std::shared_ptr<CompletionOutput>);
template std::shared_ptr<PumpJob> make_json_job<ChatOutput>(std::shared_ptr<engine::ResultStream>,
                                                            std::shared_ptr<ChatOutput>);
template std::shared_ptr<PumpJob> make_json_job<CompletionOutput>(std::shared_ptr<engine::ResultStream>,
                                                                  std::shared_ptr<CompletionOutput>);

StreamPump::StreamPump(Deliver deliver, int heartbeat_ms, HttpCounters& counters)
    : deliver_(std::move(deliver)), heartbeat_(std::max(1, heartbeat_ms)), counters_(counters) {
  thread_ = std::thread([this] { run(); });
}

void StreamPump::Waker::wake() {
  {
    std::lock_guard lock(mutex);
    woken = true;
  }
  cv.notify_one();
}

StreamPump::~StreamPump() {
  {
    std::lock_guard lock(waker_->mutex);
    waker_->stopping = true;
  }
  waker_->cv.notify_all();
  thread_.join();
  std::lock_guard lock(mutex_);
  for (auto& [id, e] : jobs_) {
    e.job->cancel();
    forget(e);
  }
  jobs_.clear();
}

bool StreamPump::stopping() const {
  std::lock_guard lock(waker_->mutex);
  return waker_->stopping;
}

void StreamPump::forget(Entry& e) {
  e.job->set_wake(nullptr);
  if (e.job->streaming()) counters_.open_streams.fetch_sub(1);
}

void StreamPump::add(uint64_t conn, std::shared_ptr<PumpJob> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping()) {
      job->cancel();
      return;
    }
    if (job->streaming()) counters_.open_streams.fetch_add(1);
    job->set_wake([w = waker_] { w->wake(); });
    jobs_[conn] = Entry{std::move(job), std::chrono::steady_clock::now()};
  }
  waker_->wake();  // output queued before the hook was set is polled at once
}

void StreamPump::drop(uint64_t conn) {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(conn);
  if (it == jobs_.end()) return;
  it->second.job->cancel();  // the scheduler frees the sequence at its next step
  forget(it->second);
  counters_.client_disconnects.fetch_add(1);
  jobs_.erase(it);
}

size_t StreamPump::open_jobs() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

std::chrono::steady_clock::time_point StreamPump::next_heartbeat() const {
  auto next = std::chrono::steady_clock::time_point::max();
  std::lock_guard lock(mutex_);
  for (const auto& [id, e] : jobs_)
    if (e.job->streaming()) next = std::min(next, e.last_write + heartbeat_);
  return next;
}

void StreamPump::run() {
  std::vector<std::pair<uint64_t, std::shared_ptr<PumpJob>>> snapshot;
  for (;;) {
    const auto heartbeat_due = next_heartbeat();
    {
      // Sleep until a stream has output, a job was added, or a heartbeat is due.
      std::unique_lock lock(waker_->mutex);
      const auto woken = [&] { return waker_->woken || waker_->stopping; };
      if (heartbeat_due == std::chrono::steady_clock::time_point::max())
        waker_->cv.wait(lock, woken);
      else
        waker_->cv.wait_until(lock, heartbeat_due, woken);
      if (waker_->stopping) return;
      waker_->woken = false;
    }
    {
      std::lock_guard lock(mutex_);
      snapshot.clear();
      for (auto& [id, e] : jobs_) snapshot.emplace_back(id, e.job);
    }
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, job] : snapshot) {
      std::string bytes;
      const bool finished = job->poll(bytes);
      std::optional<HttpResponse> response;
      if (finished && !job->streaming()) response = job->response();
      bool heartbeat = false;
      {
        std::lock_guard lock(mutex_);
        auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second.job != job) continue;  // dropped meanwhile
        if (!bytes.empty())
          it->second.last_write = now;
        else if (job->streaming() && !finished && now - it->second.last_write >= heartbeat_) {
          heartbeat = true;
          it->second.last_write = now;
        }
        if (finished) {
          forget(it->second);
          jobs_.erase(it);
        }
      }
      if (heartbeat) bytes = sse_heartbeat();
      if (!bytes.empty() || finished) deliver_(id, std::move(bytes), finished, std::move(response));
    }
  }
}

}  // namespace specserve::server
