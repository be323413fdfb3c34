#include "titan/models/llama3/llama3_spec.h"

#include "titan/models/common/decoder_spec.h"
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
  fill_decoder_spec(spec);
  return spec;
}

}  // namespace titan::models
