// The "llama3" ModelSpec: builders (from the trainer config or a LlamaForCausalLM config.json),
// the shared Hugging Face state-dict adapter, and the decoder's generic parallelize,
// post_optimizer_build, FLOPs count and pipeline split (common/decoder_plan.h).
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

ModelSpec llama3_model_spec();

}  // namespace titan::models
