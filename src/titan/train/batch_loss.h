// The loss of one local batch, computed one way for the training step, validation and
// `titan eval`: the model's forward on the batch's inputs (with its packed documents), the
// summed token cross-entropy against its labels, how many labels count, and the model's
// auxiliary loss.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "titan/data/data_loader.h"
#include "titan/models/model.h"
#include "titan/train/loss.h"

namespace titan::train {

struct BatchLoss {
  at::Tensor loss_sum;    // float32 scalar on the device: cross-entropy summed over valid labels
  int64_t tokens = 0;     // the valid labels (counted on the host: no synchronisation)
  at::Tensor extra_loss;  // the model's auxiliary loss (MoE), already scaled; may be undefined
};

// The batch's inputs and document layout go to `device`; its labels are checked on the host
// and then moved (CausalLmLoss::sum).
BatchLoss batch_loss(models::Model& model, const CausalLmLoss& loss, const data::Batch& batch,
                     at::Device device);

}  // namespace titan::train
