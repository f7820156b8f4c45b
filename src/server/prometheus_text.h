#pragma once
// The Prometheus text exposition format (version 0.0.4), written by hand: `# HELP` / `# TYPE`
// lines, then `name{label="v"} value` samples; histograms as cumulative `_bucket{le=...}`,
// `_sum` and `_count`.
#include <string>
#include <utility>
#include <vector>

#include "engine/metrics.h"

namespace specserve::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusWriter {
 public:
  // Declares a metric family (HELP/TYPE); samples of that family follow.
  void family(const std::string& name, const char* type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  void sample(const std::string& name, double value) { sample(name, {}, value); }
  // One counter / gauge family with a single unlabelled sample.
  void counter(const std::string& name, const std::string& help, double value);
  void gauge(const std::string& name, const std::string& help, double value);
  void histogram(const std::string& name, const std::string& help, const engine::Histogram::Snapshot& h,
                 const Labels& labels = {});

  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// Label values escape backslash, double quote and newline; HELP text escapes backslash and newline.
std::string escape_label_value(const std::string& v);
// Numbers as Prometheus expects them: integers without a fraction, +Inf/-Inf/NaN spelled out.
std::string format_value(double v);

}  // namespace specserve::server
