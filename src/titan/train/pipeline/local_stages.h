// The pipeline stages this rank holds (one, or two with the multi-stage schedules), each a model
// built on the meta device, cut to its stage (ModelSpec::pipeline) and materialized, seen as
// one Model by the code that need not know how the model is split: the optimizer, the
// checkpoint's model part, the state-size log. Its tensors are the stages' in stage order, under
// their global names (model.layers.N...), so checkpoints load into any split. It runs no
// forward itself: the schedule runs the stages (stage_step.h).
#pragma once

#include <memory>
#include <vector>

#include "titan/models/model.h"

namespace titan::train {

class LocalStages : public models::Model {
 public:
  struct Stage {
    int64_t index = 0;  // of the pipeline's stages
    std::unique_ptr<models::Model> model;
  };
  // `stages` in ascending index; a tensor name held by two of them is refused (the schedule
  // must place the tied embedding's two stages on different ranks).
  explicit LocalStages(std::vector<Stage> stages);

  const std::vector<Stage>& stages() const { return stages_; }
  models::Model& stage(size_t i) { return *stages_.at(i).model; }

  models::ModelOutput forward(const at::Tensor& input_ids) override;
  at::Tensor output_weight() override { return stages_.back().model->output_weight(); }
  NamedTensors named_parameters() override;
  NamedTensors named_buffers() override;
  void initialise_parameter(const std::string& name, at::Tensor& value,
                            at::Generator& generator) override {
    stages_.front().model->initialise_parameter(name, value, generator);
  }
  // The whole model's, in its order (every stage draws all of it and keeps its own).
  NamedTensors initialisation_order() override {
    return stages_.front().model->initialisation_order();
  }
  nlohmann::json hf_config(const std::string& dtype) const override {
    return stages_.front().model->hf_config(dtype);
  }
  std::vector<models::Module*> modules() override;
  std::vector<models::Module*> blocks() override;

 private:
  std::vector<Stage> stages_;
};

}  // namespace titan::train
