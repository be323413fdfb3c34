#include "titan/models/builtin_models.h"

#include "titan/models/llama3/llama3_spec.h"
#include "titan/models/qwen3/qwen3_spec.h"
#include "titan/models/transformers_backend.h"

namespace titan::models {

std::vector<ModelSpec> builtin_model_specs() {
  std::vector<ModelSpec> specs;
  specs.push_back(qwen3_model_spec());
  specs.push_back(llama3_model_spec());
  specs.push_back(transformers_backend_spec());
  return specs;
}

}  // namespace titan::models
