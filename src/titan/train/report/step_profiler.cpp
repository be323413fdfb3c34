#include "titan/train/report/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <iostream>

#include "titan/common/error.h"

namespace titan::train {
namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities_for(at::Device device) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (device.is_cuda()) a.insert(ActivityType::CUDA);
  return a;
}

ProfilerConfig profiler_config() {
  return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true);
}

}  // namespace

StepProfiler::StepProfiler(const config::TrainerConfig& cfg, int64_t rank, at::Device device)
    : cfg_(cfg), rank_(rank), device_(device) {}

StepProfiler::~StepProfiler() {
  if (active_) prof::disableProfiler();
}

bool StepProfiler::traced(int64_t step) const {
  return cfg_.profiling.enable_profiling && step % cfg_.profiling.profile_freq == 0;
}

void StepProfiler::begin_step(int64_t step) {
  if (!traced(step)) return;
  const auto activities = activities_for(device_);
  prof::prepareProfiler(profiler_config(), activities);
  prof::enableProfiler(profiler_config(), activities);
  active_ = true;
}

std::string StepProfiler::end_step(int64_t step) {
  if (!active_) return "";
  if (device_.is_cuda()) at::zeros({1}, at::TensorOptions().device(device_)).cpu();  // drain
  std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  active_ = false;
  const std::filesystem::path folder = std::filesystem::path(cfg_.job.dump_folder) /
                                       cfg_.profiling.save_traces_folder /
                                       ("iteration_" + std::to_string(step));
  std::filesystem::create_directories(folder);
  const std::string path = (folder / ("rank" + std::to_string(rank_) + "_trace.json")).string();
  result->save(path);
  TITAN_CHECK(std::filesystem::exists(path), "the profiler wrote no trace to ", path);
  return path;
}

}  // namespace titan::train
