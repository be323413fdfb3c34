// Start-up memory under tensor, pipeline and expert parallelism (docs/transformers_backend.md,
// "Start-up memory"): a pretrained model built as shapes (helper.py, build) reads each rank's
// share of its checkpoint here, in parallelize, so that no rank holds the whole model. Each
// slot first becomes a view of the memory-mapped safetensors file (nothing is read yet);
// tensor and expert parallelism then keep this rank's piece of it, as they keep a piece of any
// tensor (only those values are read, into the piece); own() gives every other slot its own
// memory, and every slot the dtype and device it was materialised with. An expert stack that
// the checkpoint holds expert by expert (Transformers merges them while loading) cannot be a
// view: the rows of this rank's experts are written into the slot's storage, which expert
// parallelism then cuts. A pipeline stage holds only its own slots, so it reads only those.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "titan/checkpoint/safetensors.h"
#include "titan/models/parallel_context.h"
#include "titan/transformers_backend/transformers_model.h"

namespace titan::transformers_backend {

class PretrainedShares {
 public:
  // Nothing when `model` was built with its weights (model.weights_dir() is empty).
  PretrainedShares(TransformersModel& model, models::ParallelContext& parallel);
  // After tensor and expert parallelism (which split `expert_stacks` over ep), before data
  // parallelism.
  void own(const std::vector<std::string>& expert_stacks);

 private:
  // An expert stack read expert by expert: the checkpoint keys of each expert's sources,
  // concatenated on `dim` of theirs.
  struct Stack {
    std::vector<std::vector<std::string>> keys;
    int64_t dim = 0;
  };
  // Returns whether it read this rank's experts only (expert parallelism splits them).
  bool fill_experts(const std::string& name, const Stack& stack, at::Tensor& slot);

  TransformersModel& model_;
  std::optional<checkpoint::SafetensorsDirectory> files_;
  int64_t expert_ranks_ = 1, expert_rank_ = 0;
  struct Kept {
    at::TensorOptions options;  // the slot's dtype and device
    bool grad = false;
    const void* file = nullptr;  // the mapped bytes the slot viewed
    bool some_experts = false;   // holds the rows of this rank's experts only
  };
  std::map<std::string, Kept> kept_;
};

}  // namespace titan::transformers_backend
