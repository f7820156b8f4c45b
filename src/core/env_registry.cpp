#include "core/env_registry.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace specserve {

namespace {

constexpr std::array kRegistry = {
    EnvVar{"SPECSERVE_LOG", EnvType::Text, "info",
           "Log level on stderr: error, warn, info or debug (another word: info)."},
    EnvVar{"SPECSERVE_ISA", EnvType::Text, "",
           "CPU kernels: unset picks the best the CPU has; avx2 forces the AVX2 kernels; avx512 keeps AVX-512 "
           "without its BF16 dot product (to test every CPU path on one machine)."},
    EnvVar{"SPECSERVE_POOL_SPIN", EnvType::Int, "4000",
           "CPU thread pool: pause iterations a worker spins before it sleeps (tens of microseconds; 0 sleeps "
           "at once, which suits a machine shared with other busy processes)."},
    EnvVar{"SPECSERVE_GRAPHS", EnvType::Switch, "1",
           "CUDA: 0 launches every kernel directly instead of recording the step's launches into CUDA graphs "
           "(the same bits; an off-switch for debugging and A/B timing)."},
    EnvVar{"SPECSERVE_PDL", EnvType::Switch, "1",
           "CUDA: 0 turns programmatic dependent launch off (plain launches; the same bits)."},
    EnvVar{"SPECSERVE_GRAPH_DEBUG", EnvType::Int, "0",
           "CUDA: log the first N CUDA graph node updates to stderr (which kernel, which parameter changed)."},
    EnvVar{"SPECSERVE_PROFILE_STEP", EnvType::Text, "",
           "`specserve bench`: repeat one step (decode, verify, propose, or prefill: one whole prompt of each "
           "--prefill length) between cudaProfilerStart and cudaProfilerStop, for scripts/gpu_profile.sh and "
           "scripts/gpu_trace.sh."},
    EnvVar{"SPECSERVE_STEP_TRACE", EnvType::Text, "",
           "Engine: write the host clock (CLOCK_MONOTONIC ns) at every step's start and at the end of each of "
           "its stages, one CSV line a step, to this file (engine/step_trace.h; read against a GPU timeline)."},
    EnvVar{"SPECSERVE_API_KEY", EnvType::Text, "",
           "`specserve serve`: the API key when --api-key is not given (the command line reads it; an "
           "environment variable keeps the key out of ps). Never printed.",
           true},
};

size_t index_of(std::string_view name) {
  for (size_t i = 0; i < kRegistry.size(); ++i)
    if (kRegistry[i].name == name) return i;
  fail("environment variable {} is not in the registry (src/core/env_registry.cpp)", name);
}

// Every variable's value, read from the environment at the first lookup of any of them.
const std::array<std::string, kRegistry.size()>& values() {
  static const auto v = [] {
    std::array<std::string, kRegistry.size()> out;
    for (size_t i = 0; i < kRegistry.size(); ++i) {
      const std::string name(kRegistry[i].name);
      const char* s = std::getenv(name.c_str());
      out[i] = s != nullptr ? std::string(s) : std::string(kRegistry[i].fallback);
    }
    return out;
  }();
  return v;
}

std::string_view type_name(EnvType t) {
  switch (t) {
    case EnvType::Switch: return "switch";
    case EnvType::Int: return "int";
    case EnvType::Text: return "text";
  }
  return "?";
}

}  // namespace

const std::vector<EnvVar>& env_registry() {
  static const std::vector<EnvVar> v(kRegistry.begin(), kRegistry.end());
  return v;
}

std::string_view env_text(std::string_view name) { return values()[index_of(name)]; }

int64_t env_int(std::string_view name) { return parse_env_int(name, env_text(name)); }

int64_t parse_env_int(std::string_view name, std::string_view v) {
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  SS_CHECK(ec == std::errc() && end == v.data() + v.size(), "environment variable {}=\"{}\" is not an integer", name,
           std::string(v));
  return out;
}

bool env_switch(std::string_view name) {
  const std::string_view v = env_text(name);
  return !(v == "0" || v == "off" || v == "false" || v == "no");
}

std::string format_env_registry() {
  std::string out;
  for (const EnvVar& e : kRegistry) {
    const std::string_view now = env_text(e.name);
    // fmt rather than "\"" + std::string(now): GCC 12 warns (-Wrestrict) on the latter, wrongly.
    const std::string shown = e.secret ? (now.empty() ? "unset" : "set") : fmt::format("\"{}\"", now);
    out += fmt::format("{}  ({}, default \"{}\", now {})\n    {}\n", e.name, type_name(e.type), std::string(e.fallback),
                       shown, e.meaning);
  }
  return out;
}

}  // namespace specserve
