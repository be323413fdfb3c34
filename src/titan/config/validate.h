// Value checks on a resolved config: enumerations, ranges and formats. Each failure throws
// titan::Error naming the key, the value and what is accepted. Checks that need the runtime
// (world size, which flavors or kernels exist) live with the code that knows it, except the
// parallelism product, which needs only the world size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::config {

// Throws at the first field whose value is out of range or not an accepted name.
// `model_names` are the model specs the caller knows of (models::model_spec_names()); the
// config room cannot know them itself, so an empty list skips that one check.
void validate_config(const TrainerConfig& config, const std::vector<std::string>& model_names = {});

// The optimizer section alone (the optimizer checks its config with this too).
void validate_optimizer_config(const OptimizerConfig& optimizer);

// dpo.loss_type's accepted values (TRL's names of the losses titan has).
const std::vector<std::string>& dpo_loss_names();

// parallelism.pipeline_parallel_schedule's accepted values (torchtitan's names; any case).
const std::vector<std::string>& pipeline_schedule_names();
// Throws naming the value, with a did-you-mean, unless it is one of them.
void check_pipeline_schedule(const std::string& name);

// The one wording for a value outside a fixed set, used by every parser of config values:
// `key = "value": accepted values are a, b, c`.
void check_one_of(const std::string& key, const std::string& value,
                  const std::vector<std::string>& accepted);

// One optimizer.param_groups entry, "GLOB=WEIGHT_DECAY" (e.g. "*norm*=0"); throws naming it.
struct ParamGroupEntry {
  std::string glob;
  double weight_decay = 0;
};
ParamGroupEntry parse_param_group_entry(const std::string& entry);

// activation_checkpoint.selective_ac_option as a block frequency: N >= 1 for an integer, 0 for
// "op". Throws naming the key otherwise.
int64_t selective_ac_frequency(const std::string& option);

// data_parallel_shard_degree after resolving -1 (whatever is left of the world size).
// Throws, naming the degrees and the world size, when they do not multiply to world_size.
int64_t resolved_data_parallel_shard_degree(const ParallelismConfig& parallelism,
                                            int64_t world_size);

// The product replicate x shard x context x tensor x pipeline must equal the world size
// (after resolving a shard degree of -1), and expert parallelism must divide the ranks it
// borrows from (shard x context x tensor), as in torchtitan.
void check_parallel_degrees(const ParallelismConfig& parallelism, int64_t world_size);

}  // namespace titan::config
