#include "titan/train/model_parts.h"

#include <set>

#include "titan/common/error.h"

namespace titan::train {

ModelParts::ModelParts(std::unique_ptr<models::Model> whole) {
  TITAN_CHECK(whole != nullptr, "model parts: no model");
  parts_.push_back({0, std::move(whole)});
}

ModelParts::ModelParts(std::vector<Part> stages) : parts_(std::move(stages)), staged_(true) {
  TITAN_CHECK(!parts_.empty(), "pipeline: a rank holds at least one stage");
  std::set<std::string> seen;
  for (Part& part : parts_) {
    for (const auto& [name, t] : part.model->named_parameters())
      TITAN_CHECK(seen.insert(name).second, "pipeline: parameter ", name,
                  " is held by two stages of this rank (the first and the last stage of a model "
                  "with tied embeddings on one rank); use a schedule that places them apart");
  }
}

std::vector<models::Model*> ModelParts::models() const {
  std::vector<models::Model*> out;
  for (const Part& part : parts_) out.push_back(part.model.get());
  return out;
}

models::Model& ModelParts::whole() const {
  TITAN_CHECK(!staged_ && parts_.size() == 1,
              "this rank holds pipeline stages, not the whole model");
  return *parts_.front().model;
}

models::ModelShape ModelParts::shape() const {
  models::ModelShape shape = parts_.front().model->shape();
  shape.layers_held = 0;
  for (const Part& part : parts_) shape.layers_held += part.model->shape().layers_held;
  return shape;
}

NamedTensors ModelParts::named_parameters() {
  NamedTensors out;
  for (Part& part : parts_)
    for (auto& p : part.model->named_parameters()) out.push_back(p);
  return out;
}

NamedTensors ModelParts::named_buffers() {
  NamedTensors out;
  for (Part& part : parts_)
    for (auto& b : part.model->named_buffers()) out.push_back(b);
  return out;
}

void ModelParts::initialise_parameter(const std::string& name, at::Tensor& value,
                                      at::Generator& generator) {
  parts_.front().model->initialise_parameter(name, value, generator);
}

NamedTensors ModelParts::initialisation_order() {
  return parts_.front().model->initialisation_order();
}

nlohmann::json ModelParts::hf_config(const std::string& dtype) const {
  return parts_.front().model->hf_config(dtype);
}

models::LoraHost* ModelParts::lora_host() {
  return staged_ ? nullptr : parts_.front().model->lora_host();
}

}  // namespace titan::train
