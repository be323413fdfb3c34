// The parts of the model a training rank holds (torchtitan's model_parts): the whole model, or
// under pipeline parallelism its stages (one, or two with the multi-stage schedules), each a
// model built as shapes, cut to its stage by ModelSpec::pipeline and given storage. What needs
// the tensors alone sees them as one ModelTensors: the optimizer, the checkpoint's model part,
// the initial load, the export. Their tensors are the parts' in stage order, under their global
// names (model.layers.N...), so checkpoints load into any split. The forwards are each part's:
// the micro-batch loop runs the whole model, the pipeline's schedule the stages.
#pragma once

#include <memory>
#include <vector>

#include "titan/models/model.h"

namespace titan::train {

class ModelParts : public models::ModelTensors {
 public:
  struct Part {
    int64_t stage = 0;  // of the pipeline's stages (0 for the whole model)
    std::unique_ptr<models::Model> model;
  };

  ModelParts() = default;
  // The whole model, one part.
  explicit ModelParts(std::unique_ptr<models::Model> whole);
  // A pipeline rank's stages, in ascending stage index; a tensor name held by two of them is
  // refused (the schedule must place a tied embedding's two stages on different ranks).
  explicit ModelParts(std::vector<Part> stages);

  bool staged() const { return staged_; }
  const std::vector<Part>& parts() const { return parts_; }
  std::vector<models::Model*> models() const;
  // The one model of an unstaged run; throws for a pipeline rank's stages.
  models::Model& whole() const;
  // The part with the highest stage index (the head's, on the last stage).
  models::Model& last() const { return *parts_.back().model; }
  // The architecture's numbers, with the blocks this rank holds over all its parts.
  models::ModelShape shape() const;

  // ModelTensors, over every part.
  NamedTensors named_parameters() override;
  NamedTensors named_buffers() override;
  // The whole model's initialisation, in its order (every stage draws all of it and keeps its
  // own).
  void initialise_parameter(const std::string& name, at::Tensor& value,
                            at::Generator& generator) override;
  NamedTensors initialisation_order() override;
  nlohmann::json hf_config(const std::string& dtype) const override;
  // The whole model's LoRA host (LoRA does not run on pipeline stages).
  models::LoraHost* lora_host() override;

 private:
  std::vector<Part> parts_;
  bool staged_ = false;
};

}  // namespace titan::train
