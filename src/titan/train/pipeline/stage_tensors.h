// Which pipeline rank holds each tensor of the whole model (parameters and buffers), learnt
// once from every rank of the pp group: a checkpoint holds every stage's tensors under their
// global names (each rank loads its own and passes over the others'), and the Hugging Face
// export takes each tensor from the first rank that holds it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "titan/distributed/group.h"

namespace titan::train {

class StageTensors {
 public:
  // `mine`: this rank's tensor names. A collective over `pp` (its tensors on `device`).
  StageTensors(distributed::Group& pp, const std::vector<std::string>& mine, at::Device device);

  // The first pipeline rank that holds `name`, or -1 when no stage does.
  int64_t holder(const std::string& name) const;
  // Whether another rank holds `name` and this one does not.
  bool held_elsewhere(const std::string& name) const;

 private:
  std::map<std::string, int64_t> holder_;
  std::set<std::string> mine_;
};

}  // namespace titan::train
