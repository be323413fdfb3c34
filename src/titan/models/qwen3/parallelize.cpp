// What the trainer applies to a built Qwen3 model from outside, in torchtitan's order
// (models/qwen3/infra/parallelize.py): tensor parallelism, expert parallelism, activation
// checkpointing, then data parallelism (FSDP/HSDP/DDP); and the expert-bias update hook
// (post_optimizer_build).
#include "titan/common/error.h"
#include "titan/common/placement.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/moe.h"
#include "titan/models/qwen3/model.h"
#include "titan/models/qwen3/qwen3_spec.h"

namespace titan::models {
namespace {

bool is_expert_weight(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

// Column-parallel q/k/v and gate/up (split on dim 0: heads, MLP columns), row-parallel o_proj
// and down (dim 1); the norms stay whole (per head, or over the hidden size). Gradients that
// are partial sums over tp (a norm whose input tp splits) are summed after backward.
void apply_tensor_parallel(Qwen3Model& model, const config::TrainerConfig& config,
                           ParallelContext& parallel) {
  const Qwen3Args& a = model.args();
  const int64_t T = parallel.degree("tp");
  TITAN_CHECK(a.num_attention_heads % T == 0 && a.num_key_value_heads % T == 0,
              "parallelism.tensor_parallel_degree = ", T, " must divide the attention heads (",
              a.num_attention_heads, ") and the key-value heads (", a.num_key_value_heads, ")");
  TITAN_CHECK(a.intermediate_size % T == 0 || a.num_experts > 0,
              "parallelism.tensor_parallel_degree = ", T,
              " must divide the MLP's intermediate_size (", a.intermediate_size, ")");
  const bool sp = config.parallelism.enable_sequence_parallel;
  if (sp)
    TITAN_CHECK(config.training.seq_len % T == 0, "training.seq_len = ", config.training.seq_len,
                ": with sequence parallelism (parallelism.enable_sequence_parallel) "
                "parallelism.tensor_parallel_degree = ",
                T, " must divide it");
  const TensorParallelHooks hooks = parallel.tensor_parallel_hooks(sp);
  auto is_column = [](const std::string& weight) {
    for (const char* s : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "mlp.gate_proj.weight",
                          "mlp.up_proj.weight"})
      if (weight.ends_with(s)) return true;
    return false;
  };
  auto is_row = [](const std::string& weight) {
    return weight.ends_with("o_proj.weight") || weight.ends_with("mlp.down_proj.weight");
  };
  for (Qwen3Block* block : model.qwen3_blocks()) {
    block->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      auto ends = [&](const char* suffix) { return name.ends_with(suffix); };
      if (is_lora_name(name) && !is_expert_weight(name)) {
        // A LoRA adapter follows its base weight: for a column-parallel W [out/T, in], B
        // holds the same rows and A stays whole; for a row-parallel W [out, in/T], A holds
        // the same columns and B stays whole. The whole one's gradient is a partial sum.
        const bool a = ends(".lora_A.weight");
        const std::string base = name.substr(0, name.size() - 14) + ".weight";
        if (is_column(base)) {
          if (a) {
            parallel.sum_gradients_over(name, "tp");
          } else {
            parallel.distribute(name, slot, "tp", 0);
          }
        } else if (is_row(base)) {
          if (a) {
            parallel.distribute(name, slot, "tp", 1);
          } else {
            parallel.sum_gradients_over(name, "tp");
          }
        }
        return;
      }
      const bool column = ends("q_proj.weight") || ends("k_proj.weight") || ends("v_proj.weight") ||
                          ends("q_proj.bias") || ends("k_proj.bias") || ends("v_proj.bias") ||
                          ends("mlp.gate_proj.weight") || ends("mlp.up_proj.weight");
      const bool row = ends("o_proj.weight") || ends("mlp.down_proj.weight");
      if (column) {
        parallel.distribute(name, slot, "tp", 0);
      } else if (row) {
        parallel.distribute(name, slot, "tp", 1);
      } else if (ends("q_norm.weight") || ends("k_norm.weight") || ends("mlp.gate.weight")) {
        // Per-head norms see this rank's heads; the router this rank's share of the tokens.
        parallel.sum_gradients_over(name, "tp");
      } else if (sp && !is_expert_weight(name)) {
        // The layer norms and the output bias see this rank's share of the sequence.
        parallel.sum_gradients_over(name, "tp");
      }
    });
    block->set_tensor_parallel(hooks);
  }
  // Vocabulary-parallel embedding and head (one tensor when tied), and the loss over it.
  Qwen3Embedding& embedding = model.embedding();
  const EvenSplit rows = even_split(a.vocab_size, T, parallel.coordinate("tp"));
  parallel.distribute("model.embed_tokens.weight", embedding.weight(), "tp", 0);
  embedding.set_vocab_parallel(rows.begin, rows.real, hooks.exit);
  Qwen3FinalNorm& norm = model.final_norm();
  if (norm.lm_head().defined()) parallel.distribute("lm_head.weight", norm.lm_head(), "tp", 0);
  if (sp) parallel.sum_gradients_over("model.norm.weight", "tp");
  model.set_vocab_size(a.vocab_size);
  model.set_vocab_parallel_loss(parallel.vocab_parallel_loss(a.vocab_size, sp));
}

// Each rank of the expert group holds num_experts / ep of every sparse layer's experts.
void apply_expert_parallel(Qwen3Model& model, ParallelContext& parallel) {
  const Qwen3Args& a = model.args();
  const int64_t E = parallel.degree("ep");
  TITAN_CHECK(a.num_experts > 0, "parallelism.expert_parallel_degree = ", E,
              ": the model has no routed experts");
  TITAN_CHECK(a.num_experts % E == 0, "parallelism.expert_parallel_degree = ", E,
              " must divide the number of experts (", a.num_experts, ")");
  const kernels::ExpertGroup group = parallel.expert_group();
  for (Qwen3Block* block : model.qwen3_blocks()) {
    if (!block->sparse()) continue;
    block->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      if (is_expert_weight(name)) parallel.distribute(name, slot, "ep", 0);
    });
    block->set_expert_group(group);
  }
}

}  // namespace

void parallelize_qwen3(Model& model, const config::TrainerConfig& config,
                       ParallelContext& parallel) {
  auto* qwen3 = dynamic_cast<Qwen3Model*>(&model);
  TITAN_CHECK(qwen3 != nullptr, "parallelize_qwen3 needs a Qwen3 model");
  if (parallel.degree("tp") > 1) apply_tensor_parallel(*qwen3, config, parallel);
  if (parallel.degree("ep") > 1) apply_expert_parallel(*qwen3, parallel);
  apply_activation_checkpointing(model.blocks(), config.activation_checkpoint);
  if (!parallel.data_parallel()) return;
  const std::string& policy = config.parallelism.fsdp_reshard_after_forward;
  const std::vector<Module*> modules = model.modules();  // embedding, blocks..., final norm
  const std::vector<Module*> blocks = model.blocks();
  Module* embedding = modules.front();
  Module* final_norm = modules.back();
  const bool tied = qwen3->args().tie_word_embeddings;
  auto shard = [&parallel](const std::vector<Module*>& modules, bool reshard) {
    ShardOptions options;
    options.reshard_after_forward = reshard;
    options.expert = is_expert_weight;
    parallel.fully_shard(modules, options);
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
      // Every rank must apply the same update: the bias is replicated, the counts are of the
      // tokens each rank routed.
      if (all_reduce) all_reduce(load);
      update_expert_bias(block->expert_bias(), load, rate);
      load.zero_();
    }
  });
}

}  // namespace titan::models
