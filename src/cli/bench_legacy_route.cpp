#include <algorithm>

#include "cli/bench_modes.h"

namespace specserve::cli {

namespace {

bool is_flag(const std::string& a, const char* name) {
  const std::string n(name);
  return a == n || a.rfind(n + "=", 0) == 0;
}

}  // namespace

std::string route_legacy_bench(std::vector<std::string>& args) {
  if (args.size() < 3 || args[1] != "bench") return "";
  const std::string first = args[2];  // a copy: the insert below may move every argument
  if (first.empty() || first[0] != '-' || first == "-h" || first == "--help" || first == "--help-all") return "";
  const bool steps = std::any_of(args.begin() + 2, args.end(),
                                 [](const std::string& a) { return is_flag(a, "--synthetic") || a == "--steps"; });
  const char* mode = steps ? kBenchSteps : kBenchServeLoad;
  args.insert(args.begin() + 2, mode);
  return std::string("note: `specserve bench ") + first + " ...` is now `specserve bench " + mode + " " + first +
         " ...`; see `specserve bench --help`";
}

}  // namespace specserve::cli
