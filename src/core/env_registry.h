#pragma once
// The environment variables specserve reads, all in one table: name, type, default and meaning. They are
// off-switches and debugging aids only (a user's choice is a command-line flag); `specserve info --env`
// prints the table with the values this process sees. Every read goes through this file: a variable is
// read from the environment once, at its first use, and keeps that value for the process's life.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specserve {

enum class EnvType {
  Switch,  // "0", "off", "false" or "no" turns it off; anything else, or unset with default "1", keeps it on
  Int,     // a decimal integer
  Text,    // one of the words the meaning lists
};

struct EnvVar {
  std::string_view name;
  EnvType type;
  std::string_view fallback;  // the value when the variable is not set ("" for none)
  std::string_view meaning;
  bool secret = false;  // `info --env` shows only whether it is set
};

// Every variable specserve reads, in a fixed order. (C++17 like every header the CUDA kernels include.)
const std::vector<EnvVar>& env_registry();

// The variable's value as this process sees it (read once, at the first call for that name; its
// fallback when unset). Fails (specserve::fail) for a name that is not in the registry, so a new read
// cannot bypass it.
std::string_view env_text(std::string_view name);
// env_text as an integer; fails with a clear error when it is not one.
int64_t env_int(std::string_view name);
// The integer parse env_int applies to a variable's text: an optional '-' and decimal digits that fit in
// int64_t, nothing else (fuzz/fuzz_env_int.cpp). Fails naming `name` otherwise.
int64_t parse_env_int(std::string_view name, std::string_view text);
// Switches: false when the value is "0", "off", "false" or "no", true otherwise.
bool env_switch(std::string_view name);

// The table as `specserve info --env` prints it: one line per variable (name, type, default, current
// value), its meaning indented below.
std::string format_env_registry();

}  // namespace specserve
