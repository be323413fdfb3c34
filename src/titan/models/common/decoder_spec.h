// What every decoder family's ModelSpec shares, filled in by one call: parallelize with the
// family's plan of parameter roles (decoder_plan.h), the expert-bias hook after each optimizer
// step, the Hugging Face state-dict adapter (hf_state_dict_adapter.h), the FLOPs count and the
// pipeline cut (Decoder::keep_only). A family's spec sets its names and builders, then this.
#pragma once

#include "titan/models/common/decoder_plan.h"
#include "titan/models/model_spec.h"

namespace titan::models {

void fill_decoder_spec(ModelSpec& spec, DecoderPlan plan = standard_decoder_plan());

}  // namespace titan::models
