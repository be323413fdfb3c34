// The forward and backward of a training step, over the batches it reads (one, or several with
// gradient accumulation), and the loss of a validation batch: the micro-batch loop of one
// process or of any data / tensor / expert parallel layout, or the pipeline's schedule
// (pipeline/pipeline_forward_backward.h). The trainer's step calls one of them and knows no
// other difference.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "titan/data/data_loader.h"
#include "titan/models/model.h"
#include "titan/train/loss.h"
#include "titan/train/step_scale.h"

namespace titan::distributed {
class MeshContext;
}

namespace titan::train {

class ForwardBackward {
 public:
  virtual ~ForwardBackward() = default;
  // Every batch's forward and backward, the losses scaled by `scale`; the gradients accumulate
  // in the parameters, with data parallelism's reductions done. Returns this rank's part of
  // the step's loss (float64 [1] on the device; the sum over the "loss" ranks is the step's).
  virtual at::Tensor run(const std::vector<data::Batch>& batches, const StepScale& scale) = 0;
  // A validation batch: (summed token cross-entropy, valid label tokens) of this rank's rows,
  // the same on every rank that holds a stage of them.
  virtual std::pair<double, double> evaluate(const data::Batch& batch) = 0;
};

// The micro-batch loop: each batch's forward through the whole model, its loss scaled, its
// backward, data parallelism told which backward is the step's last.
class AccumulatingForwardBackward : public ForwardBackward {
 public:
  // All must outlive this.
  AccumulatingForwardBackward(models::Model& model, const CausalLmLoss& loss,
                              distributed::MeshContext& parallel, const NamedTensors& params,
                              at::Device device);
  at::Tensor run(const std::vector<data::Batch>& batches, const StepScale& scale) override;
  std::pair<double, double> evaluate(const data::Batch& batch) override;

 private:
  models::Model& model_;
  const CausalLmLoss& loss_;
  distributed::MeshContext& parallel_;
  const NamedTensors& params_;
  at::Device device_;
};

}  // namespace titan::train
