#include "titan/models/common/decoder_spec.h"

#include "titan/models/common/hf_state_dict_adapter.h"

namespace titan::models {

void fill_decoder_spec(ModelSpec& spec, DecoderPlan plan) {
  spec.parallelize = [plan = std::move(plan)](Model& model, const config::TrainerConfig& cfg,
                                              ParallelContext& parallel) {
    parallelize_decoder(as_decoder(model), plan, cfg, parallel);
  };
  spec.post_optimizer_build = decoder_post_optimizer_build;
  spec.adapter = decoder_state_dict_adapter();
  spec.flops_per_token = [](Model& model, int64_t seq_len) {
    return decoder_flops_per_token(as_decoder(model), seq_len);
  };
  spec.pipeline = [](Model& model, const StageParts& parts) { as_decoder(model).keep_only(parts); };
}

}  // namespace titan::models
