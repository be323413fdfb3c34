#include "titan/train/report/model_state_log.h"

#include <map>
#include <sstream>

#include "titan/common/strings.h"

namespace titan::train {

std::string model_state_line(const ModelStateLog& log) {
  double bytes = 0, whole = 0;
  auto global_numel = [&log](const std::string& name, const at::Tensor& p) {
    const TensorPlacement* placement = log.parallel.placements().find(name);
    if (placement == nullptr) return static_cast<double>(p.numel());
    double numel = 1;
    for (int64_t d : placement->global_shape) numel *= static_cast<double>(d);
    return numel;
  };
  std::map<std::string, at::Tensor> held;
  for (const auto& [name, p] : log.optimizer.params()) {
    const double element = static_cast<double>(p.element_size());
    bytes += static_cast<double>(p.numel()) * element;
    whole += global_numel(name, p) * element;
    held[name] = p;
  }
  // A pipeline stage's share is of the whole model, every stage's tensors counted.
  if (log.staged) {
    whole = 0;
    for (const auto& [name, t] : log.model.initialisation_order()) {
      auto it = held.find(name);
      whole +=
          (it != held.end() ? global_numel(name, it->second) : static_cast<double>(t.numel())) *
          static_cast<double>(t.element_size());
    }
  }
  const double mib = bytes / (1024.0 * 1024.0);
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(mib < 1 ? 3 : 1);  // LoRA's adapters may take well under a MiB
  const double state_mib = log.optimizer.state_bytes() / (1024.0 * 1024.0);
  line << "[titan] rank " << log.parallel.mesh().rank() << " of " << log.parallel.degree("world")
       << " holds " << mib << " MiB of parameters, as much again of gradients and " << state_mib
       << " MiB of optimizer state: " << 2 * mib + state_mib << " MiB, ";
  line.precision(2);
  line << (whole > 0 ? 100.0 * bytes / whole : 100.0) << "% of the "
       << (log.lora ? "adapters'" : "model's");
  for (const auto& [dim, degree] : log.parallel.dims().named())
    if (degree > 1) line << " " << dim << "=" << degree;
  line << log.stages;
  if (log.lora) {
    // The frozen base: this rank's pieces of its dense weights, and the NF4 ones whole.
    double frozen = 0;
    for (const auto& [name, p] : log.model.named_parameters())
      if (!p.requires_grad()) frozen += static_cast<double>(p.numel() * p.element_size());
    frozen += static_cast<double>(log.lora->nf4_bytes);
    line.precision(1);
    line << "; and " << frozen / (1024.0 * 1024.0) << " MiB of frozen base";
  }
  const AdamW& optimizer = log.optimizer;
  if (optimizer.name() == "AdamW8bit") {
    int64_t eight_bit = 0;
    for (size_t i = 0; i < optimizer.params().size(); ++i) eight_bit += optimizer.eight_bit(i);
    line << "; AdamW8bit: 8-bit moments for " << eight_bit << " of " << optimizer.params().size()
         << " tensors";
    if (!optimizer.float32_by_layout().empty())
      line << " (float32 for " << join(optimizer.float32_by_layout())
           << ": their pieces on the ranks cut blocks of 256)";
  }
  return line.str();
}

}  // namespace titan::train
