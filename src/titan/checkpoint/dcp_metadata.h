// The index of a torch.distributed.checkpoint (DCP) folder, its `.metadata` file: every entry
// of the flattened state dict (a tensor, with its dtype, global shape and the chunks ranks
// saved of it, or a non-tensor item) and where each chunk or item lies in the __R_S.distcp
// files. Read through the restricted unpickler (nothing in the file runs), written as torch
// 2.11's FileSystemWriter writes it. docs/from_torchtitan.md ("Your checkpoints").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace titan::checkpoint {

struct DcpChunk {
  std::vector<int64_t> offsets, sizes;  // the box of the global tensor one rank saved
};

struct DcpTensorInfo {
  std::string dtype;  // torch's name: "float32", "bfloat16", ...
  std::vector<int64_t> size;
  std::vector<DcpChunk> chunks;
};

// Where one chunk (or item) is: a whole torch.save archive in relative_path.
struct DcpStorage {
  std::string relative_path;
  uint64_t offset = 0, length = 0;
};

struct DcpMetadata {
  std::map<std::string, DcpTensorInfo> tensors;
  std::vector<std::string> items;  // the non-tensor entries (BytesStorageMetadata)
  // By (entry, chunk offsets); an item's offsets are empty.
  std::map<std::pair<std::string, std::vector<int64_t>>, DcpStorage> storage;
  // An entry's path in the nested state dict it was flattened from (("optimizer",
  // "state.norm.weight.step")); written for torch's planner, absent: the entry's name alone.
  std::map<std::string, std::vector<std::string>> planner_paths;

  bool is_tensor(const std::string& fqn) const { return tensors.count(fqn) > 0; }
  bool is_item(const std::string& fqn) const;
};

// Parses <dir>/.metadata; throws titan::Error naming the file for anything but DCP metadata
// (and, before anything of it is read, for a global outside DCP's classes).
DcpMetadata read_dcp_metadata(const std::string& dir);

// The bytes of a .metadata pickle for `metadata`; `checkpoint_id` is recorded as torch records
// the folder it saved to.
std::string dcp_metadata_pickle(const DcpMetadata& metadata, const std::string& checkpoint_id);

}  // namespace titan::checkpoint
