#include "titan/train/final_export.h"

#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/hf_export.h"

namespace titan::train {

std::string export_hf_if_requested(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                                   models::Model& model, int64_t step,
                                   const checkpoint::TensorLayout& layout) {
  if (!cfg.checkpoint.last_save_in_hf) return "";
  const std::string dir = checkpoint::hf_export_folder(cfg.job.dump_folder, step);
  checkpoint::export_hf_directory(model, spec, dir, cfg.checkpoint.export_dtype,
                                  checkpoint::parse_size(cfg.checkpoint.hf_max_shard_size),
                                  cfg.model.hf_assets_path, layout);
  if (layout.coordinator())
    std::cout << "[titan] exported Hugging Face checkpoint to " << dir << std::endl;
  return dir;
}

}  // namespace titan::train
