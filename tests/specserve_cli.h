#pragma once
// Runs the built `specserve` binary from a test: its stdout and exit status (stderr discarded),
// and the comma-separated id lists its --prompt-ids flag takes. Shared by the CLI tests of
// tests/model and tests/spec (their binaries depend on the specserve target).
#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace specserve::testing {

struct CliRun {
  int status = -1;
  std::string out;
};

// `args` follow the binary name, e.g. "generate --model DIR ...".
inline CliRun run_specserve(const std::string& args) {
  const std::string cmd = std::string(SPECSERVE_BINARY_DIR) + "/bin/specserve " + args + " 2>/dev/null";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

}  // namespace specserve::testing
