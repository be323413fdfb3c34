// The progress line between logged steps, when stdout is a terminal: step, steps per second
// and the estimated time left, rewritten in place ("\r") and cleared before the next plain
// line. When stdout is not a terminal (a log file, a pipe) it writes nothing, so logs hold
// only the step lines.
#pragma once

#include <cstdint>
#include <iosfwd>

namespace titan::train {

class ProgressLine {
 public:
  // Active when `enabled` (rank 0) and stdout is a terminal.
  ProgressLine(std::ostream& out, bool enabled);

  // After step `step` of `total`, which took `seconds`.
  void update(int64_t step, int64_t total, double seconds);
  // Erases the line, if one is shown, so the next output starts at column 0.
  void clear();

 private:
  std::ostream& out_;
  bool active_;
  bool shown_ = false;
  double seconds_per_step_ = 0;  // exponential moving average
};

}  // namespace titan::train
