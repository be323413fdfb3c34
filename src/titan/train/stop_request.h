// A graceful stop on SIGTERM or SIGINT, what torchrun and cluster schedulers send before they
// kill a job: the first signal asks the trainer to stop after the step it is in (it then
// writes a checkpoint and exits 0); a second signal exits at once.
//
// A signal handler can only set a flag, so the flag is one of the few globals (one per
// process, like the handlers themselves). StopRequest installs the handlers for its lifetime.
#pragma once

namespace titan::train {

class StopRequest {
 public:
  StopRequest();   // installs the SIGTERM/SIGINT handlers
  ~StopRequest();  // restores the previous ones
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // The signal received so far (SIGTERM, SIGINT) or 0.
  int signal() const;
  // "SIGTERM", "SIGINT", or "signal N".
  static const char* name(int signal);
};

}  // namespace titan::train
