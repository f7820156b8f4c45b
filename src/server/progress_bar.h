#pragma once
// Start-up progress on stderr: a redrawn bar on a terminal, plain lines otherwise (logs and CI
// capture stay readable: at most one line per 10% step).
#include <chrono>
#include <string>

namespace specserve::server {

class ProgressBar {
 public:
  explicit ProgressBar(std::string title);
  // Same line on a TTY; a new line in logs only when the decile or the label changes.
  void update(double fraction, const std::string& label);
  // Ends the bar (a newline on a TTY).
  void finish(const std::string& label);

 private:
  std::string title_;
  bool tty_;
  int last_decile_ = -1;
  std::string last_label_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace specserve::server
