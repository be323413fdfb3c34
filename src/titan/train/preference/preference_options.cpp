#include "titan/train/preference/preference_options.h"

#include <algorithm>

#include "titan/config/derived_defaults.h"
#include "titan/data/chat_template.h"
#include "titan/distributed/sequence_shards.h"

namespace titan::train {

data::PreferenceLoaderOptions preference_loader_options(const config::TrainerConfig& cfg,
                                                        const data::Tokenizer& tokenizer) {
  const std::string& assets = cfg.model.hf_assets_path;
  data::PreferenceLoaderOptions o;
  o.local_batch_size = cfg.training.local_batch_size;
  o.length.max_length = cfg.dpo.max_length;
  o.length.keep_end = cfg.dpo.truncation_mode == "keep_end";
  // TRL appends tokenizer.eos_token; a folder that names none falls back to titan's separator.
  o.eos_token = config::tokenizer_config_eos(assets);
  if (o.eos_token.empty()) o.eos_token = cfg.training.eos_token;
  // The pad id never reaches a loss (its labels are ignored, right padding under causal
  // attention); the tokenizer's pad token, as TRL pads, else the eos.
  std::string pad = config::tokenizer_config_token(assets, "pad_token");
  if (pad.empty()) pad = o.eos_token;
  o.pad_id = tokenizer.token_to_id(pad);
  if (cfg.training.shuffle) o.shuffle_seed = static_cast<uint64_t>(cfg.training.seed);
  o.prefetch = cfg.training.prefetch_batches;
  o.chat_template = [assets] { return data::load_chat_template(assets); };
  // Sequence parallelism splits a row's tokens over the tensor-parallel ranks, and context
  // parallelism over its load balancer's chunks, each cp rank's part then over tp (right
  // padding changes no real token's output).
  const config::ParallelismConfig& p = cfg.parallelism;
  o.pad_multiple = std::max<int64_t>(1, p.tensor_parallel_degree);
  if (p.context_parallel_degree > 1)
    o.pad_multiple *= distributed::sequence_chunks(
        p.context_parallel_degree,
        distributed::parse_load_balancer(p.context_parallel_load_balancer));
  return o;
}

}  // namespace titan::train
