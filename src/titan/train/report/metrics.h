// Step metrics: the torchtitan-style step line on stdout and one JSON object per logged step
// in <dump_folder>/metrics.jsonl (docs/architecture.md section 3), with the seconds since
// training started (elapsed_s).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::train {

class EventWriter;

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double memory_gib = 0;      // peak allocated (CUDA) or peak RSS (CPU)
  double memory_percent = 0;  // of the device's / machine's memory
  double tps = 0;             // tokens per second per device
  double tflops = 0;
  std::optional<double> mfu;              // percent; only when the device's peak is known
  double memory_reserved_gib = 0;         // CUDA: reserved by the caching allocator
  int64_t skipped_steps = 0;              // steps skipped for a non-finite loss or gradient
  double data_loading_s = 0;              // the step's wait for its batches (torchtitan's
                                          // data_loading time)
  std::optional<double> validation_loss;  // when the validator ran at this step
  // SFT: the step's trained (assistant) label tokens over all ranks, on the step line too.
  std::optional<int64_t> trained_tokens;
  int64_t documents_read = 0;  // documents this rank read (tokenized) so far
  // The objective's own metrics by name (DPO: rewards/chosen ..., TRL's), in the step line,
  // metrics.jsonl and TensorBoard.
  std::vector<std::pair<std::string, double>> objective_metrics;
  // For the TensorBoard scalars (torchtitan's, tensorboard_tags.h), not in metrics.jsonl:
  std::optional<double> max_loss;  // the largest of the data-parallel ranks' mean token losses
  int64_t window_steps = 1;        // steps since the previous logged step
  double window_seconds = 0;       // and their wall time
  int64_t tokens_seen = 0;         // over all ranks, this step included
  double memory_reserved_percent = 0;
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
};

// Peak memory of this process on `device`, in GiB, and as a percentage of the total.
std::pair<double, double> peak_memory(at::Device device);
// Peak memory reserved by the CUDA caching allocator, in GiB (0 on the CPU).
double peak_reserved_memory(at::Device device);
// The CUDA caching allocator's reserved peak as a percentage of the device's memory, its
// allocation retries and out-of-memory count (zeros on the CPU), into `m`.
void add_allocator_counters(at::Device device, StepMetrics& m);

// Dense bf16 peak FLOP/s of the device, when known (H100/H200: 989e12); nullopt on the CPU.
std::optional<double> device_peak_flops(at::Device device);

// <dump_folder>/<metrics.save_tb_folder> when metrics.enable_tensorboard, else "".
std::string tensorboard_folder(const config::TrainerConfig& cfg);

class MetricsLogger {
 public:
  // Appends to <dump_folder>/metrics.jsonl (created with its folder) and, with a non-empty
  // `tensorboard_folder`, writes the same values as TensorBoard scalars there.
  MetricsLogger(const std::string& dump_folder, bool enabled,
                const std::string& tensorboard_folder = "");
  ~MetricsLogger();
  void log(const StepMetrics& m);

 private:
  std::ofstream jsonl_;
  bool enabled_;
  // When the logger was made (the end of set-up): metrics.jsonl's elapsed_s counts from here.
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unique_ptr<EventWriter> tensorboard_;
};

std::string format_step_line(const StepMetrics& m);
// torchtitan's validation line: "validate step: 10  loss: 2.34567".
std::string format_validation_line(int64_t step, double loss);

}  // namespace titan::train
