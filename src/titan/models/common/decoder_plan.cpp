#include "titan/models/common/decoder_plan.h"

#include "titan/common/error.h"
#include "titan/common/placement.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/moe.h"

namespace titan::models {

void check_decoder_degrees(const DecoderConfig& c, const config::TrainerConfig& config, int64_t T,
                           int64_t E) {
  if (T > 1) {
    TITAN_CHECK(c.attention.num_heads % T == 0 && c.attention.num_kv_heads % T == 0,
                "parallelism.tensor_parallel_degree = ", T, " must divide the attention heads (",
                c.attention.num_heads, ") and the key-value heads (", c.attention.num_kv_heads,
                ")");
    bool any_dense = false;
    for (bool sparse : c.sparse) any_dense = any_dense || !sparse;
    TITAN_CHECK(!any_dense || c.intermediate_size % T == 0,
                "parallelism.tensor_parallel_degree = ", T,
                " must divide the MLP's intermediate_size (", c.intermediate_size, ")");
    if (config.parallelism.enable_sequence_parallel)
      TITAN_CHECK(config.training.seq_len % T == 0, "training.seq_len = ", config.training.seq_len,
                  ": with sequence parallelism (parallelism.enable_sequence_parallel) "
                  "parallelism.tensor_parallel_degree = ",
                  T, " must divide it");
  }
  if (E > 1) {
    TITAN_CHECK(c.moe.num_experts > 0, "parallelism.expert_parallel_degree = ", E,
                ": the model has no routed experts");
    TITAN_CHECK(c.moe.num_experts % E == 0, "parallelism.expert_parallel_degree = ", E,
                " must divide the number of experts (", c.moe.num_experts, ")");
  }
}

namespace {

using Role = ParameterRole;

// The role of an adapter tensor, from its base's.
Role adapter_role(Role base, bool is_a) {
  switch (base) {
    case Role::kColumn:
      return is_a ? Role::kPartialOverTp : Role::kColumn;
    case Role::kRow:
      return is_a ? Role::kRow : Role::kPartialOverTp;
    case Role::kExpert:
      return Role::kExpert;
    default:
      return Role::kReplicated;
  }
}

void apply_tensor_parallel(Decoder& model, const DecoderPlan& plan,
                           const config::TrainerConfig& config, ParallelContext& parallel) {
  const DecoderConfig& c = model.config();
  const int64_t T = parallel.degree("tp");
  check_decoder_degrees(c, config, T, 1);
  const bool sp = config.parallelism.enable_sequence_parallel;
  const TensorParallelHooks hooks = parallel.tensor_parallel_hooks(sp);
  auto apply = [&](const std::string& name, at::Tensor& slot) {
    switch (plan.role_of(name)) {
      case Role::kColumn:
      case Role::kVocabulary:
        parallel.distribute(name, slot, "tp", 0);
        break;
      case Role::kRow:
        parallel.distribute(name, slot, "tp", 1);
        break;
      case Role::kPartialOverTp:
        parallel.sum_gradients_over(name, "tp");
        break;
      case Role::kSequencePartial:
        if (sp) parallel.sum_gradients_over(name, "tp");
        break;
      case Role::kExpert:
      case Role::kReplicated:
        break;
    }
  };
  for (Module* m : model.modules()) m->visit_parameters(apply);
  for (TransformerBlock* block : model.layers()) block->set_tensor_parallel(hooks);
  // The vocabulary-parallel embedding (each rank looks up the rows it holds), and the loss over
  // the head's rows.
  if (model.stage().embedding) {
    const EvenSplit rows = even_split(c.vocab_size, T, parallel.coordinate("tp"));
    model.embedding().set_vocab_parallel(rows.begin, rows.real, hooks.exit);
  }
  if (model.stage().head) parallel.use_vocab_parallel_head(c.vocab_size, sp);
}

void apply_expert_parallel(Decoder& model, const DecoderPlan& plan, ParallelContext& parallel) {
  const int64_t E = parallel.degree("ep");
  check_decoder_degrees(model.config(), config::TrainerConfig(), 1, E);
  const kernels::ExpertGroup group = parallel.expert_group();
  for (TransformerBlock* block : model.layers()) {
    if (!block->sparse()) continue;
    block->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      if (plan.role_of(name) == Role::kExpert) parallel.distribute(name, slot, "ep", 0);
    });
    block->moe()->set_expert_group(group);
  }
}

// Every layer's attention reaches the other cp ranks' keys and values.
void apply_context_parallel(Decoder& model, ParallelContext& parallel) {
  const ContextParallelAttention attend = parallel.context_parallel_attention();
  for (TransformerBlock* block : model.layers()) block->attention().set_context_parallel(attend);
}

}  // namespace

bool is_expert_parameter(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

ParameterRole DecoderPlan::role_of(const std::string& name) const {
  if (is_lora_name(name)) {
    const bool expert = is_expert_parameter(name);
    return adapter_role(role_of(lora_base_name(name, /*linear=*/!expert)),
                        name.ends_with(".lora_A.weight"));
  }
  for (const Rule& rule : rules)
    if (name.ends_with(rule.suffix)) return rule.role;
  return Role::kReplicated;
}

DecoderPlan standard_decoder_plan() {
  DecoderPlan plan;
  for (const char* column :
       {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
        "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
        "mlp.gate_proj.weight", "mlp.up_proj.weight"})
    plan.rules.emplace_back(column, Role::kColumn);
  plan.rules.emplace_back("self_attn.o_proj.weight", Role::kRow);
  plan.rules.emplace_back("mlp.down_proj.weight", Role::kRow);
  // Per-head norms see this rank's heads; the router this rank's share of the tokens.
  for (const char* partial :
       {"self_attn.q_norm.weight", "self_attn.k_norm.weight", "mlp.gate.weight"})
    plan.rules.emplace_back(partial, Role::kPartialOverTp);
  plan.rules.emplace_back("mlp.experts.gate_up_proj", Role::kExpert);
  plan.rules.emplace_back("mlp.experts.down_proj", Role::kExpert);
  plan.rules.emplace_back("model.embed_tokens.weight", Role::kVocabulary);
  plan.rules.emplace_back("lm_head.weight", Role::kVocabulary);
  // The layer norms, the final norm and the output bias see this rank's share of the sequence
  // under sequence parallelism.
  for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight",
                           "model.norm.weight", "self_attn.o_proj.bias"})
    plan.rules.emplace_back(norm, Role::kSequencePartial);
  return plan;
}

void parallelize_decoder(Decoder& model, const DecoderPlan& plan,
                         const config::TrainerConfig& config, ParallelContext& parallel) {
  if (parallel.degree("tp") > 1) apply_tensor_parallel(model, plan, config, parallel);
  if (parallel.degree("cp") > 1) apply_context_parallel(model, parallel);
  // The MoE layers' aux loss is over this rank's share of the tokens: its part of the sequence
  // (cp), and of that its share of the routing (tp).
  model.set_aux_loss_divisor(static_cast<double>(parallel.degree("tp") * parallel.degree("cp")));
  if (parallel.degree("ep") > 1) apply_expert_parallel(model, plan, parallel);
  apply_activation_checkpointing(model.blocks(), config.activation_checkpoint);
  if (!parallel.data_parallel()) return;
  DecoderUnits units;
  units.blocks = model.blocks();
  const bool tied = model.config().tie_word_embeddings;
  if (model.holds_embedding()) {
    // A tied embedding is the head: it joins the head's unit (on a stage that holds the head).
    if (tied && model.stage().head)
      units.head.push_back(&model.embedding());
    else
      units.embedding = &model.embedding();
  }
  if (model.stage().head) units.head.push_back(&model.final_norm());
  shard_decoder_units(parallel, units, config.parallelism.fsdp_reshard_after_forward,
                      is_expert_parameter);
}

void shard_decoder_units(ParallelContext& parallel, const DecoderUnits& units,
                         const std::string& policy,
                         std::function<bool(const std::string&)> expert) {
  auto shard = [&](const std::vector<Module*>& modules, bool reshard) {
    ShardOptions options;
    options.reshard_after_forward = reshard;
    options.expert = expert;
    parallel.fully_shard(modules, options);
  };
  if (units.embedding != nullptr) shard({units.embedding}, policy != "never");
  for (size_t i = 0; i < units.blocks.size(); ++i) {
    // torchtitan's default: the last block's backward starts right after its forward.
    const bool reshard = policy == "always" || (policy == "default" && i + 1 < units.blocks.size());
    shard({units.blocks[i]}, reshard);
  }
  if (!units.head.empty()) shard(units.head, false);
}

double decoder_flops_per_token(const NamedTensors& params, const std::string& embedding_name,
                               bool tied, const std::function<bool(const std::string&)>& expert,
                               double routed_fraction, int64_t layers, int64_t heads,
                               int64_t head_dim, int64_t seq_len) {
  double active = 0;
  for (const auto& [name, t] : params) {
    const double n = static_cast<double>(t.numel());
    if (name == embedding_name) {
      if (tied) active += n;  // counts once, as the output head
    } else if (expert && expert(name)) {
      active += n * routed_fraction;
    } else {
      active += n;
    }
  }
  const double attention = 12.0 * static_cast<double>(layers) * static_cast<double>(heads) *
                           static_cast<double>(head_dim) * static_cast<double>(seq_len);
  return 6.0 * active + attention;
}

double decoder_flops_per_token(Decoder& model, int64_t seq_len) {
  const DecoderConfig& c = model.config();
  const double routed = c.moe.num_experts > 0 ? static_cast<double>(c.moe.top_k) /
                                                    static_cast<double>(c.moe.num_experts)
                                              : 1.0;
  return decoder_flops_per_token(model.initialisation_order(), "model.embed_tokens.weight",
                                 c.tie_word_embeddings, is_expert_parameter, routed, c.num_layers,
                                 c.attention.num_heads, c.attention.head_dim, seq_len);
}

void decoder_post_optimizer_build(Model& model, const OptimizerHooks& hooks) {
  auto* decoder = dynamic_cast<Decoder*>(&model);
  if (decoder == nullptr || decoder->config().balancing.balancing != MoeBalancing::kExpertBias)
    return;
  TITAN_CHECK(hooks.add_step_post_hook, "expert-bias balancing needs an optimizer step hook");
  const double rate = decoder->config().balancing.expert_bias_update_rate;
  auto all_reduce = hooks.all_reduce_sum;
  hooks.add_step_post_hook([decoder, rate, all_reduce] {
    for (TransformerBlock* block : decoder->layers()) {
      MoeLayer* moe = block->moe();
      if (moe == nullptr || !moe->tokens_per_expert().defined()) continue;
      at::Tensor& load = moe->tokens_per_expert();
      // Every rank holding this layer must apply the same update: the bias is replicated, the
      // counts are of the tokens each rank routed.
      if (all_reduce) all_reduce(load);
      update_expert_bias(moe->expert_bias(), load, rate);
      load.zero_();
    }
  });
}

}  // namespace titan::models
