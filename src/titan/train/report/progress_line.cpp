#include "titan/train/report/progress_line.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>

namespace titan::train {

ProgressLine::ProgressLine(std::ostream& out, bool enabled) : out_(out) {
  if (!enabled) return;
  if (::isatty(STDOUT_FILENO) == 1) {
    active_ = true;
    return;
  }
  // Non-blocking: a wrapper that stopped reading never holds up training (updates are dropped).
  if (const char* fifo = std::getenv("TITAN_PROGRESS_FIFO"); fifo != nullptr && *fifo != '\0') {
    fifo_ = ::open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    active_ = fifo_ >= 0;
  }
}

ProgressLine::~ProgressLine() {
  clear();
  if (fifo_ >= 0) ::close(fifo_);
}

void ProgressLine::send(const std::string& message) {
  // One write of at most PIPE_BUF bytes is atomic: the wrapper reads whole messages.
  const std::string line = message + "\n";
  [[maybe_unused]] const ssize_t written = ::write(fifo_, line.data(), line.size());
}

void ProgressLine::update(int64_t step, int64_t total, double seconds) {
  if (!active_) return;
  // Weighted towards recent steps, so the estimate follows a change of speed.
  seconds_per_step_ = seconds_per_step_ == 0 ? seconds : 0.8 * seconds_per_step_ + 0.2 * seconds;
  const double rate = seconds_per_step_ > 0 ? 1.0 / seconds_per_step_ : 0;
  const auto left = static_cast<long long>(seconds_per_step_ * static_cast<double>(total - step));
  char buf[160];
  std::snprintf(buf, sizeof buf, "[titan] step %lld/%lld  %.2f steps/s  ETA %lld:%02lld:%02lld",
                static_cast<long long>(step), static_cast<long long>(total), rate, left / 3600,
                left / 60 % 60, left % 60);
  if (fifo_ >= 0) {
    send(buf);
  } else {
    out_ << "\r\033[K" << buf << std::flush;
  }
  shown_ = true;
}

void ProgressLine::clear() {
  if (!shown_) return;
  if (fifo_ >= 0) {
    send("");
  } else {
    out_ << "\r\033[K" << std::flush;
  }
  shown_ = false;
}

}  // namespace titan::train
