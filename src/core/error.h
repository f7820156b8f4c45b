#pragma once
// The one error type of specserve: a one-line message, optionally prefixed by context
// ("loading model.safetensors: tensor 'x': shape [2,3] × F32 = 24 bytes, data is 20 bytes").
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace specserve {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}

  // Returns a new error whose message is "context: <this message>".
  [[nodiscard]] Error with_context(const std::string& context) const { return Error(context + ": " + what()); }
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Runs fn(); any Error it throws is rethrown with `context` prepended.
template <typename Fn>
decltype(auto) with_context(const std::string& context, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const Error& e) {
    throw e.with_context(context);
  }
}

}  // namespace specserve

// Checks an invariant that depends on input or configuration; throws specserve::Error.
#define SS_CHECK(cond, ...)                      \
  do {                                           \
    if (!(cond)) ::specserve::fail(__VA_ARGS__); \
  } while (0)

// Internal invariant checked only in debug builds (SPECSERVE_DEBUG_CHECKS).
#if defined(SPECSERVE_DEBUG_CHECKS)
#define SS_DEBUG_CHECK(cond, ...) SS_CHECK(cond, __VA_ARGS__)
#else
#define SS_DEBUG_CHECK(cond, ...) \
  do {                            \
  } while (0)
#endif
