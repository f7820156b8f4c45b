#include "server/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace specserve::server {

ProgressBar::ProgressBar(std::string title)
    : title_(std::move(title)), tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(double fraction, const std::string& label) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth + 0.5);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %5.1fs %s", title_.c_str(), bar.c_str(), fraction * 100, secs,
                 label.c_str());
    std::fflush(stderr);
    return;
  }
  const int decile = static_cast<int>(fraction * 10);
  if (decile == last_decile_ && label == last_label_) return;
  last_decile_ = decile;
  last_label_ = label;
  std::fprintf(stderr, "%s: %3.0f%% (%.1fs) %s\n", title_.c_str(), fraction * 100, secs, label.c_str());
}

void ProgressBar::finish(const std::string& label) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s: %s in %.1fs\n", title_.c_str(), label.c_str(), secs);
  } else {
    std::fprintf(stderr, "%s: %s in %.1fs\n", title_.c_str(), label.c_str(), secs);
  }
  std::fflush(stderr);
}

}  // namespace specserve::server
