// Writing a torch.distributed.checkpoint (DCP) folder as one rank of torch 2.11's
// FileSystemWriter does: __0_0.distcp holding one torch.save archive per entry (non-tensor
// items first, then tensors, each whole: one chunk, which a job of any world size loads) and
// the .metadata index. The folder appears complete or not at all.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace titan::checkpoint {

class DcpWriter {
 public:
  // `planner_path`: the entry's path in the nested state dict it stands for (("optimizer",
  // "state.norm.weight.step")); empty: the name alone.
  void add_tensor(const std::string& fqn, const at::Tensor& tensor,
                  std::vector<std::string> planner_path = {});
  // A non-tensor item: plain JSON data (arrays become lists), or a ready pickle.
  void add_item(const std::string& fqn, const nlohmann::json& value,
                std::vector<std::string> planner_path = {});
  void add_pickled_item(const std::string& fqn, std::string pickle,
                        std::vector<std::string> planner_path = {});

  // Writes the folder `dir`, replacing any folder there only once it is complete.
  void write(const std::string& dir) const;

 private:
  struct Entry {
    std::string fqn;
    at::Tensor tensor;   // undefined for an item
    std::string pickle;  // an item's pickle
    std::vector<std::string> planner_path;
  };
  void check_new(const std::string& fqn) const;
  std::vector<Entry> entries_;
};

}  // namespace titan::checkpoint
