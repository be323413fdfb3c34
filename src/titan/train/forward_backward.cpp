#include "titan/train/forward_backward.h"

#include "titan/distributed/mesh_context.h"
#include "titan/train/batch_loss.h"

namespace titan::train {

AccumulatingForwardBackward::AccumulatingForwardBackward(models::Model& model,
                                                         const CausalLmLoss& loss,
                                                         distributed::MeshContext& parallel,
                                                         const NamedTensors& params,
                                                         at::Device device)
    : model_(model), loss_(loss), parallel_(parallel), params_(params), device_(device) {}

at::Tensor AccumulatingForwardBackward::run(const std::vector<data::Batch>& batches,
                                            const StepScale& scale) {
  at::Tensor loss_sum = at::zeros({1}, at::TensorOptions(device_).dtype(at::kDouble));
  for (size_t i = 0; i < batches.size(); ++i) {
    const bool last = i + 1 == batches.size();
    parallel_.start_backward(last);
    const BatchLoss b = batch_loss(model_, loss_, batches[i], device_);
    const at::Tensor loss = scale.loss(b.loss_sum, b.extra_loss);
    loss.backward();
    parallel_.finish_backward(last, params_);
    loss_sum.add_(loss.detach().to(at::kDouble));
  }
  return loss_sum;
}

std::pair<double, double> AccumulatingForwardBackward::evaluate(const data::Batch& batch) {
  const BatchLoss b = batch_loss(model_, loss_, batch, device_);
  return {b.loss_sum.item<double>(), static_cast<double>(b.tokens)};
}

}  // namespace titan::train
