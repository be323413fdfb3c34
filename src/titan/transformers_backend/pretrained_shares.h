// Start-up memory under tensor, pipeline and expert parallelism (docs/transformers_backend.md,
// "Start-up memory"): a pretrained model built as shapes (helper.py, build) reads each rank's
// share of its checkpoint here, in parallelize, so that no rank holds the whole model. Each
// slot first becomes a view of the memory-mapped safetensors file (nothing is read yet);
// tensor and expert parallelism then keep this rank's piece of it, as they keep a piece of any
// tensor (only those values are read, into the piece); own() gives every other slot its own
// memory, and every slot the dtype and device it was materialised with. A pipeline stage holds
// only its own slots, so it reads only those.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>

#include "titan/checkpoint/safetensors.h"
#include "titan/transformers_backend/transformers_model.h"

namespace titan::transformers_backend {

class PretrainedShares {
 public:
  // Nothing when `model` was built with its weights (model.weights_dir() is empty).
  explicit PretrainedShares(TransformersModel& model);
  // After tensor and expert parallelism, before data parallelism.
  void own();

 private:
  TransformersModel& model_;
  std::optional<checkpoint::SafetensorsDirectory> files_;
  struct Kept {
    at::TensorOptions options;  // the slot's dtype and device
    bool grad = false;
    const void* file = nullptr;  // the mapped bytes the slot viewed
  };
  std::map<std::string, Kept> kept_;
};

}  // namespace titan::transformers_backend
