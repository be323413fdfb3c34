#include "titan/models/llama3/model.h"

#include "titan/models/common/decoder_args.h"

namespace titan::models {

DecoderConfig llama3_decoder_config(const Llama3Args& a) {
  a.validate("Llama 3 model");
  DecoderConfig c = decoder_config_of(a, /*qk_norm=*/false);
  c.rope.factor = a.rope_factor;
  c.rope.low_freq_factor = a.rope_low_freq_factor;
  c.rope.high_freq_factor = a.rope_high_freq_factor;
  c.rope.original_max_position_embeddings = a.rope_original_max_position_embeddings;
  return c;
}

}  // namespace titan::models
