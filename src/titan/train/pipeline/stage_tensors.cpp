#include "titan/train/pipeline/stage_tensors.h"

#include <sstream>

#include "titan/train/distributed_setup.h"

namespace titan::train {

StageTensors::StageTensors(distributed::Group& pp, const std::vector<std::string>& mine,
                           at::Device device)
    : mine_(mine.begin(), mine.end()) {
  std::string joined;
  for (const std::string& name : mine) joined += name + "\n";
  const std::vector<std::string> all = all_gather_strings(pp, joined, device);
  for (size_t rank = 0; rank < all.size(); ++rank) {
    std::istringstream lines(all[rank]);
    std::string name;
    while (std::getline(lines, name))
      if (!name.empty()) holder_.emplace(name, static_cast<int64_t>(rank));  // first one wins
  }
}

int64_t StageTensors::holder(const std::string& name) const {
  auto it = holder_.find(name);
  return it == holder_.end() ? -1 : it->second;
}

bool StageTensors::held_elsewhere(const std::string& name) const {
  return mine_.count(name) == 0 && holder_.count(name) > 0;
}

}  // namespace titan::train
