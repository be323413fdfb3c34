// The progress line between logged steps: step, steps per second and the estimated time left,
// rewritten in place ("\r") and cleared before the next plain line, on rank 0.
//
// It is drawn where a person sees it: on stdout when that is a terminal; under build/bin/torchrun
// (scripts/torchrun.py), whose workers write to files, through the named pipe the wrapper gives
// in TITAN_PROGRESS_FIFO (one message per line: the text to draw, an empty line to clear it),
// which the wrapper draws on its terminal below the log lines. Elsewhere (a log file, a pipe,
// plain torchrun) it writes nothing, so logs hold only the step lines.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace titan::train {

class ProgressLine {
 public:
  // Active when `enabled` (rank 0) and stdout is a terminal or TITAN_PROGRESS_FIFO opens.
  ProgressLine(std::ostream& out, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // After step `step` of `total`, which took `seconds`.
  void update(int64_t step, int64_t total, double seconds);
  // Erases the line, if one is shown, so the next output starts at column 0.
  void clear();

 private:
  void send(const std::string& message);  // to the wrapper's pipe

  std::ostream& out_;
  bool active_ = false;
  int fifo_ = -1;  // the wrapper's pipe, or -1: draw on out_
  bool shown_ = false;
  double seconds_per_step_ = 0;  // exponential moving average
};

}  // namespace titan::train
