#pragma once
// `bench serve-load --rounds N`: the concurrency levels run N times in turn (each run with prompts of its own,
// so no round hits what an earlier one left in the prefix cache), and this summary gives each level's median
// and range over its rounds. One pass of a level of a few hundred requests lasts a second or two, and two
// passes of the same build can differ by tens of percent (docs/history/BENCHMARKS-log.md, session 37): the
// median of interleaved rounds is what a comparison of builds should read.
#include <string>
#include <vector>

#include "server/load_generator.h"

namespace specserve::server {

struct LevelSummary {
  int concurrency = 0;
  int rounds = 0;
  int errors = 0;  // over every round
  double tokens_per_s_median = 0, tokens_per_s_min = 0, tokens_per_s_max = 0;
  double ttft_p50_median = 0, itl_p50_median = 0;  // seconds: the median over rounds of each round's p50
};

// One summary per concurrency level, in the order the levels first appear in `results`.
std::vector<LevelSummary> summarize_rounds(const std::vector<LevelResult>& results);

// A Markdown table of the summaries.
std::string format_round_summary(const std::vector<LevelSummary>& summaries);

}  // namespace specserve::server
