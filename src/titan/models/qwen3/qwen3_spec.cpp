#include "titan/models/qwen3/qwen3_spec.h"

#include "titan/common/error.h"
#include "titan/models/common/decoder_spec.h"
#include "titan/models/qwen3/model.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::models {
namespace {

std::unique_ptr<Model> build_from_trainer_config(const config::TrainerConfig& cfg,
                                                 const BuildOptions& build) {
  const Qwen3Args args = resolve_qwen3_args(cfg.model);
  Qwen3Options options;
  options.balancing = parse_moe_balancing(cfg.model.moe_load_balancing);
  options.router_aux_loss_coef = cfg.model.router_aux_loss_coef;
  options.expert_bias_update_rate = cfg.model.expert_bias_update_rate;
  return std::make_unique<Qwen3Model>(args, options, build);
}

// A config.json with output_router_logits=true trains with HF's auxiliary loss, as
// transformers does.
std::unique_ptr<Model> build_from_hf(const nlohmann::json& hf_config, const std::string& source,
                                     const BuildOptions& build) {
  const Qwen3Args args = qwen3_args_from_hf_config(hf_config, source);
  Qwen3Options options;
  if (args.is_moe() && args.output_router_logits) options.balancing = MoeBalancing::kAuxLoss;
  options.router_aux_loss_coef = args.router_aux_loss_coef;
  return std::make_unique<Qwen3Model>(args, options, build);
}

}  // namespace

ModelSpec qwen3_model_spec() {
  ModelSpec spec;
  spec.name = "qwen3";
  spec.description = "native C++ Qwen3 / Qwen3-MoE";
  spec.hf_model_types = {"qwen3", "qwen3_moe"};
  spec.hf_architectures = {"Qwen3ForCausalLM", "Qwen3MoeForCausalLM"};
  spec.build = build_from_trainer_config;
  spec.build_from_hf_config = build_from_hf;
  fill_decoder_spec(spec);
  return spec;
}

}  // namespace titan::models
