#include "titan/models/llama3/llama3_spec.h"

#include "titan/models/common/decoder_plan.h"
#include "titan/models/common/hf_state_dict_adapter.h"
#include "titan/models/llama3/model.h"

namespace titan::models {

ModelSpec llama3_model_spec() {
  ModelSpec spec;
  spec.name = "llama3";
  spec.description = "native C++ Llama 3";
  spec.hf_model_types = {"llama"};
  spec.hf_architectures = {"LlamaForCausalLM"};
  spec.build = [](const config::TrainerConfig& cfg, const BuildOptions& build) {
    return std::unique_ptr<Model>(
        std::make_unique<Llama3Model>(resolve_llama3_args(cfg.model), build));
  };
  spec.build_from_hf_config = [](const nlohmann::json& hf_config, const std::string& source,
                                 const BuildOptions& build) {
    return std::unique_ptr<Model>(
        std::make_unique<Llama3Model>(llama3_args_from_hf_config(hf_config, source), build));
  };
  spec.parallelize = [](Model& model, const config::TrainerConfig& cfg, ParallelContext& parallel) {
    parallelize_decoder(as_decoder(model), standard_decoder_plan(), cfg, parallel);
  };
  spec.post_optimizer_build = decoder_post_optimizer_build;
  spec.adapter = decoder_state_dict_adapter();
  spec.flops_per_token = [](Model& model, int64_t seq_len) {
    return decoder_flops_per_token(as_decoder(model), seq_len);
  };
  spec.pipeline = [](Model& model, const StageParts& parts) { as_decoder(model).keep_only(parts); };
  return spec;
}

}  // namespace titan::models
