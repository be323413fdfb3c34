// Tensor and expert parallelism for a Transformers model (docs/transformers_backend.md): the
// parameters' roles come from the model's own plans (tp_plan.py, experts.py); these functions
// split titan's slots accordingly and hand titan's collectives to the Python hooks.
#pragma once

#include "titan/config/trainer_config.h"
#include "titan/models/parallel_context.h"
#include "titan/transformers_backend/transformers_model.h"

namespace titan::transformers_backend {

// Splits over tp what the model's tp_plan splits, installs the region entries and exits, and
// makes the head vocabulary-parallel (loss parallel). With parallelism.enable_sequence_parallel
// the residual stream between the regions is sharded over the sequence (tp_plan.py). Throws one
// error naming the model, the degree and why when the plan cannot be honoured. Nothing when tp
// is 1.
void apply_tensor_parallel(TransformersModel& model, const config::TrainerConfig& config,
                           models::ParallelContext& parallel);

// Splits the expert stacks over ep and exchanges tokens around each experts module. Returns
// the names of the expert stacks (FSDP shards them over efsdp). Nothing when ep is 1.
std::vector<std::string> apply_expert_parallel(TransformersModel& model,
                                               models::ParallelContext& parallel);

}  // namespace titan::transformers_backend
