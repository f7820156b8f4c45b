#pragma once
// Minimal logging to stderr: "[specserve] component: message". Level from SPECSERVE_LOG
// (error|warn|info|debug; default info).
#include <fmt/format.h>

#include <string_view>

namespace specserve {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, std::string_view component, std::string_view message);

template <typename... Args>
void log(LogLevel level, std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  if (level > log_level()) return;
  log_line(level, component, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace specserve

#define SS_LOG_INFO(component, ...) ::specserve::log(::specserve::LogLevel::Info, component, __VA_ARGS__)
#define SS_LOG_WARN(component, ...) ::specserve::log(::specserve::LogLevel::Warn, component, __VA_ARGS__)
#define SS_LOG_ERROR(component, ...) ::specserve::log(::specserve::LogLevel::Error, component, __VA_ARGS__)
#define SS_LOG_DEBUG(component, ...) ::specserve::log(::specserve::LogLevel::Debug, component, __VA_ARGS__)
