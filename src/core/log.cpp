#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/env_registry.h"

namespace specserve {

namespace {
LogLevel initial_level() {
  const std::string_view v = env_text("SPECSERVE_LOG");
  if (v == "error") return LogLevel::Error;
  if (v == "warn") return LogLevel::Warn;
  if (v == "debug") return LogLevel::Debug;
  return LogLevel::Info;
}
std::atomic<int>& level_slot() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}
}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_slot().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_slot().store(static_cast<int>(level)); }

void log_line(LogLevel level, std::string_view component, std::string_view message) {
  static std::mutex mutex;
  static const char* names[] = {"error", "warn", "info", "debug"};
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "[specserve] %s %.*s: %.*s\n", names[static_cast<int>(level)],
               static_cast<int>(component.size()), component.data(), static_cast<int>(message.size()), message.data());
}

}  // namespace specserve
