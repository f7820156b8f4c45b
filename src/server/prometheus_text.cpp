#include "server/prometheus_text.h"

#include <cmath>

#include <fmt/format.h>

namespace specserve::server {

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

static std::string escape_help(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);  // shortest round-trip form
}

void PrometheusWriter::family(const std::string& name, const char* type, const std::string& help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help), name, type);
}

void PrometheusWriter::sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out_ += ',';
      out_ += fmt::format("{}=\"{}\"", labels[i].first, escape_label_value(labels[i].second));
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

void PrometheusWriter::counter(const std::string& name, const std::string& help, double value) {
  family(name, "counter", help);
  sample(name, value);
}

void PrometheusWriter::gauge(const std::string& name, const std::string& help, double value) {
  family(name, "gauge", help);
  sample(name, value);
}

void PrometheusWriter::histogram(const std::string& name, const std::string& help, const engine::Histogram::Snapshot& h,
                                 const Labels& labels) {
  family(name, "histogram", help);
  for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
    Labels l = labels;
    l.emplace_back("le", format_value(h.upper_bounds[i]));
    sample(name + "_bucket", l, static_cast<double>(h.cumulative_counts[i]));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  sample(name + "_bucket", inf, static_cast<double>(h.count));
  sample(name + "_sum", labels, h.sum);
  sample(name + "_count", labels, static_cast<double>(h.count));
}

}  // namespace specserve::server
