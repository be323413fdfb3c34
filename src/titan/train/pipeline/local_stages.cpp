#include "titan/train/pipeline/local_stages.h"

#include <set>

#include "titan/common/error.h"

namespace titan::train {

LocalStages::LocalStages(std::vector<Stage> stages) : stages_(std::move(stages)) {
  TITAN_CHECK(!stages_.empty(), "pipeline: a rank holds at least one stage");
  std::set<std::string> seen;
  for (Stage& s : stages_) {
    for (const auto& [name, t] : s.model->named_parameters())
      TITAN_CHECK(seen.insert(name).second, "pipeline: parameter ", name,
                  " is held by two stages of this rank (the first and the last stage of a model "
                  "with tied embeddings on one rank); use a schedule that places them apart");
  }
}

models::ModelOutput LocalStages::forward(const at::Tensor&) {
  fail("a pipeline stage runs its forward through the schedule, not alone");
}

NamedTensors LocalStages::named_parameters() {
  NamedTensors out;
  for (Stage& s : stages_)
    for (auto& p : s.model->named_parameters()) out.push_back(p);
  return out;
}

NamedTensors LocalStages::named_buffers() {
  NamedTensors out;
  for (Stage& s : stages_)
    for (auto& b : s.model->named_buffers()) out.push_back(b);
  return out;
}

std::vector<models::Module*> LocalStages::modules() {
  std::vector<models::Module*> out;
  for (Stage& s : stages_)
    for (models::Module* m : s.model->modules()) out.push_back(m);
  return out;
}

std::vector<models::Module*> LocalStages::blocks() {
  std::vector<models::Module*> out;
  for (Stage& s : stages_)
    for (models::Module* m : s.model->blocks()) out.push_back(m);
  return out;
}

}  // namespace titan::train
