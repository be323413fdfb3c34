// titan convert's torchtitan directions (docs/from_torchtitan.md, "Your checkpoints"):
//   --from-torchtitan DIR --to hf|titan OUT [config: --module M --config F |
//       --job.config_file f.toml, --section.key value ...]
//     a torchtitan DCP checkpoint (step-N) into a Hugging Face folder or a titan training
//     checkpoint; the config names the model it holds (torchtitan's files record none);
//   --from DIR --to torchtitan OUT [--dtype D] [--full]
//     a Hugging Face folder or titan training checkpoint into a DCP checkpoint torchtitan
//     0.3.0 loads (model-only, or with --full from a training checkpoint the optimizer state,
//     step and lr position too).
#pragma once

#include <string>
#include <vector>

namespace titan::cli {

int convert_from_torchtitan(const std::string& from, const std::string& to_kind,
                            const std::string& to, const std::vector<std::string>& config_args,
                            const std::string& dtype, const std::string& max_shard_size);

int convert_to_torchtitan(const std::string& from, const std::string& to, const std::string& dtype,
                          bool full);

}  // namespace titan::cli
