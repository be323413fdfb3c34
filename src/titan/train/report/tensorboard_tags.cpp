#include "titan/train/report/tensorboard_tags.h"

#include <algorithm>

namespace titan::train {

std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& m) {
  // torchtitan's times are per step over the steps since the previous log (its log_freq).
  const double steps = static_cast<double>(std::max<int64_t>(m.window_steps, 1));
  const double seconds = std::max(m.window_seconds, 1e-12);
  std::vector<std::pair<std::string, double>> s = {
      {"loss_metrics/global_avg_loss", m.loss},
      {"loss_metrics/global_max_loss", m.max_loss.value_or(m.loss)},
      {"grad_norm", m.grad_norm},
      {"lr", m.lr},
      {"n_tokens_seen", static_cast<double>(m.tokens_seen)},
      {"throughput(tps)", m.tps},
      {"tflops", m.tflops},
      {"time_metrics/end_to_end(s)", m.window_seconds / steps},
      {"time_metrics/data_loading(s)", m.data_loading_s / steps},
      {"time_metrics/data_loading(%)", 100.0 * m.data_loading_s / seconds},
      {"memory/max_active(GiB)", m.memory_gib},
      {"memory/max_active(%)", m.memory_percent},
      {"memory/max_reserved(GiB)", m.memory_reserved_gib},
      {"memory/max_reserved(%)", m.memory_reserved_percent},
      {"memory/num_alloc_retries", static_cast<double>(m.num_alloc_retries)},
      {"memory/num_ooms", static_cast<double>(m.num_ooms)},
      {"skipped_steps", static_cast<double>(m.skipped_steps)},
  };
  if (m.mfu) s.emplace_back("mfu(%)", *m.mfu);
  if (m.validation_loss) s.emplace_back("validation_metrics/loss", *m.validation_loss);
  for (const auto& [name, value] : m.objective_metrics) s.emplace_back(name, value);
  return s;
}

}  // namespace titan::train
