// What the trainer applies to a built Qwen3 model from outside: wrappers (parallelize) and the
// expert-bias update hook (post_optimizer_build).
#include "titan/common/error.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/moe.h"
#include "titan/models/qwen3/model.h"
#include "titan/models/qwen3/qwen3_spec.h"

namespace titan::models {

void parallelize_qwen3(Model& model, const config::TrainerConfig& config,
                       ParallelContext& parallel) {
  apply_activation_checkpointing(model.blocks(), config.activation_checkpoint);
  if (!parallel.data_parallel()) return;
  auto* qwen3 = dynamic_cast<Qwen3Model*>(&model);
  TITAN_CHECK(qwen3 != nullptr, "parallelize_qwen3 needs a Qwen3 model");
  const std::string& policy = config.parallelism.fsdp_reshard_after_forward;
  const std::vector<Module*> modules = model.modules();  // embedding, blocks..., final norm
  const std::vector<Module*> blocks = model.blocks();
  Module* embedding = modules.front();
  Module* final_norm = modules.back();
  const bool tied = qwen3->args().tie_word_embeddings;
  auto shard = [&parallel](const std::vector<Module*>& modules, bool reshard) {
    parallel.fully_shard(modules, ShardOptions{reshard});
  };
  if (!tied) shard({embedding}, policy != "never");
  for (size_t i = 0; i < blocks.size(); ++i) {
    // torchtitan's default: the last block's backward starts right after its forward.
    const bool reshard = policy == "always" || (policy == "default" && i + 1 < blocks.size());
    shard({blocks[i]}, reshard);
  }
  // The head is read by the loss after the final norm's forward, so this unit stays gathered
  // until its backward; a tied embedding is the head, so it joins this unit.
  if (tied) {
    shard({embedding, final_norm}, false);
  } else {
    shard({final_norm}, false);
  }
}

void qwen3_post_optimizer_build(Model& model, const OptimizerHooks& hooks) {
  auto* qwen3 = dynamic_cast<Qwen3Model*>(&model);
  if (qwen3 == nullptr || qwen3->options().balancing != MoeBalancing::kExpertBias) return;
  TITAN_CHECK(hooks.add_step_post_hook, "expert-bias balancing needs an optimizer step hook");
  const double rate = qwen3->options().expert_bias_update_rate;
  auto all_reduce = hooks.all_reduce_sum;
  hooks.add_step_post_hook([qwen3, rate, all_reduce] {
    for (Qwen3Block* block : qwen3->qwen3_blocks()) {
      if (!block->tokens_per_expert().defined()) continue;
      at::Tensor& load = block->tokens_per_expert();
      // Every rank must apply the same update: the bias is replicated, the counts are local.
      if (all_reduce) all_reduce(load);
      update_expert_bias(block->expert_bias(), load, rate);
      load.zero_();
    }
  });
}

}  // namespace titan::models
