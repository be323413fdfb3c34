#include "titan/train/stop_request.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

namespace titan::train {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
struct sigaction g_previous_term {};
struct sigaction g_previous_int {};

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0) _exit(128 + sig);  // the second signal: no more waiting
  g_stop_signal = sig;
  // write() is async-signal-safe; std::cout is not.
  static const char kMessage[] =
      "\n[titan] stop requested: finishing this step, then checkpointing (signal again to exit "
      "now)\n";
  ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
}

}  // namespace

StopRequest::StopRequest() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = &on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a signal must not fail the write() of a checkpoint
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGINT, &action, &g_previous_int);
}

StopRequest::~StopRequest() {
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGINT, &g_previous_int, nullptr);
}

int StopRequest::signal() const { return g_stop_signal; }

const char* StopRequest::name(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGINT) return "SIGINT";
  return "a signal";
}

}  // namespace titan::train
