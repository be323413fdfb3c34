#include "titan/train/progress_line.h"

#include <unistd.h>

#include <cstdio>
#include <ostream>

namespace titan::train {

ProgressLine::ProgressLine(std::ostream& out, bool enabled)
    : out_(out), active_(enabled && ::isatty(STDOUT_FILENO) == 1) {}

void ProgressLine::update(int64_t step, int64_t total, double seconds) {
  if (!active_) return;
  // Weighted towards recent steps, so the estimate follows a change of speed.
  seconds_per_step_ = seconds_per_step_ == 0 ? seconds : 0.8 * seconds_per_step_ + 0.2 * seconds;
  const double rate = seconds_per_step_ > 0 ? 1.0 / seconds_per_step_ : 0;
  const auto left = static_cast<long long>(seconds_per_step_ * static_cast<double>(total - step));
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "\r\033[K[titan] step %lld/%lld  %.2f steps/s  ETA %lld:%02lld:%02lld",
                static_cast<long long>(step), static_cast<long long>(total), rate, left / 3600,
                left / 60 % 60, left % 60);
  out_ << buf << std::flush;
  shown_ = true;
}

void ProgressLine::clear() {
  if (!shown_) return;
  out_ << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace titan::train
