// The TensorBoard scalars of a logged step, under torchtitan's tags (its
// components/metrics.py, release 0.2), so dashboards made for torchtitan read titan's runs:
//   loss_metrics/global_avg_loss, loss_metrics/global_max_loss, grad_norm, lr, n_tokens_seen,
//   throughput(tps), tflops, mfu(%) (when the device's peak is known),
//   time_metrics/end_to_end(s), time_metrics/data_loading(s), time_metrics/data_loading(%),
//   memory/max_active(GiB), memory/max_active(%), memory/max_reserved(GiB),
//   memory/max_reserved(%), memory/num_alloc_retries, memory/num_ooms,
//   validation_metrics/loss (at validation steps),
// and titan's own skipped_steps. metrics.jsonl keeps its own keys (docs/architecture.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "titan/train/report/metrics.h"

namespace titan::train {

std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& m);

}  // namespace titan::train
