// Traces of chosen training steps (profiling.*, torchtitan's names): every profiling.profile_freq
// steps, one step is recorded with the libtorch (Kineto) profiler, CPU ops and, on CUDA, the
// kernels, and written as a Chrome trace to
// <dump_folder>/<profiling.save_traces_folder>/iteration_<step>/rank<r>_trace.json
// (chrome://tracing, Perfetto, or bench/profile_table.py for the top ops).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "titan/config/trainer_config.h"

namespace titan::train {

class StepProfiler {
 public:
  StepProfiler(const config::TrainerConfig& cfg, int64_t rank, at::Device device);
  ~StepProfiler();  // stops a trace still running (an exception left the step)
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void begin_step(int64_t step);
  // Writes the trace of `step` when it was traced; returns its path or "".
  std::string end_step(int64_t step);

 private:
  bool traced(int64_t step) const;
  const config::TrainerConfig& cfg_;
  int64_t rank_;
  at::Device device_;
  bool active_ = false;
};

}  // namespace titan::train
