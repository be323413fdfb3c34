// The "qwen3" ModelSpec: builders (from the trainer config or a config.json), the state-dict
// adapter, and the decoder's generic parallelize, post_optimizer_build and FLOPs count
// (common/decoder_plan.h) with Qwen3's plan of parameter roles.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

ModelSpec qwen3_model_spec();

}  // namespace titan::models
