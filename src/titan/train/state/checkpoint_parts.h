// The trainer's Stateful parts (stateful.h), one small adapter each:
//   model         parameters and buffers (native names), plus the model's description
//                 (spec name, its Hugging Face config, the assets folder) that titan convert,
//                 eval and generate rebuild it from; with LoRA only the adapters (the trained
//                 parameters) and buffers, and the LoRA setup with its base's fingerprint;
//   optimizer     AdamW's state (optimizer_state_names.h);
//   lr_scheduler  the last step the schedule was at (the schedule is a function of the step);
//   dataloader    the data loader's position;
//   train_state   the step and the tokens seen;
//   rng           the CPU generator's state.
#pragma once

#include <functional>
#include <optional>

#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"
#include "titan/lora/lora_model.h"
#include "titan/models/model_spec.h"
#include "titan/train/optimizer.h"
#include "titan/train/state/stateful.h"

namespace titan::train {

// Under pipeline parallelism a rank holds some stages' tensors while a checkpoint holds every
// stage's: this says which of the whole model's tensors another rank holds (unset: none).
using HeldElsewhere = std::function<bool(const std::string& name)>;

class ModelState : public Stateful {
 public:
  // `lora`: the run's LoRA setup (nullptr without LoRA); must outlive this.
  ModelState(models::ModelTensors& model, const models::ModelSpec& spec,
             const config::TrainerConfig& cfg, const lora::LoraSetup* lora = nullptr,
             HeldElsewhere held_elsewhere = nullptr)
      : model_(model),
        spec_(spec),
        cfg_(cfg),
        lora_(lora),
        held_elsewhere_(std::move(held_elsewhere)) {}
  PartState save() const override;
  // Every model tensor must be in the checkpoint with its global shape, and nothing else (but
  // the tensors other stages hold): checked before anything is copied. A LoRA checkpoint must
  // have trained on this run's base.
  void load(const PartReader& in) override;

 private:
  NamedTensors tensors() const;
  models::ModelTensors& model_;
  const models::ModelSpec& spec_;
  const config::TrainerConfig& cfg_;
  const lora::LoraSetup* lora_;
  HeldElsewhere held_elsewhere_;
};

class OptimizerState : public Stateful {
 public:
  OptimizerState(AdamW& optimizer, models::ModelTensors& model,
                 HeldElsewhere held_elsewhere = nullptr)
      : optimizer_(optimizer), model_(model), held_elsewhere_(std::move(held_elsewhere)) {}
  PartState save() const override { return {optimizer_.state(), nullptr}; }
  // The state of this rank's parameters (another stage's parameters' state is passed over).
  void load(const PartReader& in) override;

 private:
  AdamW& optimizer_;
  models::ModelTensors& model_;
  HeldElsewhere held_elsewhere_;
};

struct TrainState : Stateful {
  int64_t step = 0;  // the last step completed
  int64_t tokens_seen = 0;
  PartState save() const override;
  void load(const PartReader& in) override;
};

class LrSchedulerState : public Stateful {
 public:
  explicit LrSchedulerState(const TrainState& train) : train_(train) {}
  PartState save() const override { return {{}, {{"last_step", train_.step}}}; }
  void load(const PartReader&) override {}  // the step (train_state) places the schedule

 private:
  const TrainState& train_;
};

class DataLoaderState : public Stateful {
 public:
  explicit DataLoaderState(data::BatchSource& loader) : loader_(loader) {}
  PartState save() const override { return {{}, saved_.value_or(loader_.state())}; }
  void load(const PartReader& in) override;
  // torchtitan's data position (TorchtitanCheckpointReader::dataloader(); null: none), taken
  // when this run reads the same rows the same way. Returns "" when taken, else why not.
  std::string load_torchtitan(const nlohmann::json& position);
  // The position the next save records instead of the loader's (where a failed step began);
  // nullopt: the loader's own.
  void save_position(std::optional<nlohmann::json> position) { saved_ = std::move(position); }

 private:
  data::BatchSource& loader_;
  std::optional<nlohmann::json> saved_;
};

struct RngState : Stateful {
  PartState save() const override;
  void load(const PartReader& in) override;
};

}  // namespace titan::train
