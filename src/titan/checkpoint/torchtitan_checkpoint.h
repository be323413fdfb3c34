// torchtitan 0.3.0's checkpoints (a DCP folder, step-N) in titan's names and layouts, and
// titan's model (and optimizer state) written as one (docs/from_torchtitan.md, "Your
// checkpoints"). torchtitan saves its model's state dict flat at the top level (no prefix) and
// beside it `optimizer.state.<param>.<exp_avg|exp_avg_sq|step>`,
// `optimizer.param_groups.<param>.<setting>`, `lr_scheduler.last_epoch`,
// `train_state.{step,ntokens_seen}` and `dataloader.{dp_rank_R,world_size}` (a pickle of its
// loader's state); a model-only checkpoint (a seed checkpoint, last_save_model_only) holds the
// model's entries alone. Names and layouts: torchtitan_names.h.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "titan/checkpoint/dcp_reader.h"
#include "titan/checkpoint/torchtitan_names.h"
#include "titan/common/named_tensors.h"

namespace titan::checkpoint {

// Whether `dir` is a DCP checkpoint torchtitan's decoders wrote (its .metadata names
// tok_embeddings.weight).
bool is_torchtitan_checkpoint(const std::string& dir);

class TorchtitanCheckpointReader {
 public:
  // `params` and `buffers`: the model's tensors by titan name with their whole shapes (meta
  // tensors will do); `hf_config` its Hugging Face config; `model_description` names it in
  // errors ("qwen3, flavor debugmodel"). Every tensor is checked here, before any is read: a
  // checkpoint of another architecture is one error describing both.
  TorchtitanCheckpointReader(const std::string& dir, const NamedTensors& params,
                             const NamedTensors& buffers, const nlohmann::json& hf_config,
                             const std::string& model_description);

  const std::string& dir() const { return reader_.dir(); }
  // Whether it holds the training state too (optimizer, lr_scheduler, train_state), not only
  // the model.
  bool full() const { return full_; }

  // A model tensor (parameter or buffer) by titan name, in the checkpoint's dtype.
  at::Tensor model_tensor(const std::string& name) const;
  std::vector<std::string> model_names() const;
  // AdamW's state by titan's names ("<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step");
  // empty unless full().
  std::vector<std::string> optimizer_names() const;
  at::Tensor optimizer_tensor(const std::string& name) const;
  // train_state.step and ntokens_seen, lr_scheduler.last_epoch (0 when absent).
  int64_t step() const { return step_; }
  int64_t tokens_seen() const { return tokens_seen_; }
  int64_t lr_last_epoch() const { return lr_last_epoch_; }
  // The first parameter group's settings (lr, initial_lr, betas, eps, weight_decay), as JSON;
  // null when model-only.
  const nlohmann::json& param_group() const { return param_group_; }
  // torchtitan's data position: {"world_size": N, "ranks": [{"sample_idx", "epoch",
  // "inputs_buffer", "labels_buffer"}, ...]}; null when it has none (or an unreadable one,
  // then a note says why).
  const nlohmann::json& dataloader() const { return dataloader_; }
  // What of the checkpoint titan does not take, one line each.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::string resolve(const std::string& torchtitan_name) const;  // the name as saved
  void read_training_state();

  DcpReader reader_;
  TorchtitanModel model_;
  std::string prefix_;  // "" (0.3.0) or "model." (a nested model state dict)
  std::map<std::string, TorchtitanSource> model_sources_;
  std::map<std::string, TorchtitanSource> optimizer_sources_;  // by "<param>.<field>"
  std::vector<std::string> optimizer_order_;
  bool full_ = false;
  int64_t step_ = 0, tokens_seen_ = 0, lr_last_epoch_ = 0;
  nlohmann::json param_group_, dataloader_;
  std::vector<std::string> notes_;
};

// What `write_torchtitan_checkpoint` writes.
struct TorchtitanExport {
  NamedTensors model;  // titan names: parameters, then buffers
  bool tied = false;   // tie_word_embeddings: torchtitan saves lm_head.weight as well
  at::ScalarType dtype = at::kFloat;  // of the model tensors (torchtitan's export_dtype)
  // The training state (a full checkpoint); empty optimizer: model-only.
  NamedTensors optimizer;  // "<param>.exp_avg|exp_avg_sq|step"
  int64_t step = 0, tokens_seen = 0;
  // lr (the schedule's value at `step`), initial_lr, betas, eps, weight_decay: every
  // parameter's group in torchtitan's single-group AdamW.
  nlohmann::json param_group;
};

// Writes `dir` (a step-N folder) as torchtitan 0.3.0 loads it: model-only as
// checkpoint.initial_load_path, or full to resume from (with
// --checkpoint.exclude_from_loading dataloader: titan writes no data position).
void write_torchtitan_checkpoint(const std::string& dir, const TorchtitanExport& state,
                                 const nlohmann::json& hf_config);

}  // namespace titan::checkpoint
