// Reading a torch.distributed.checkpoint (DCP) folder as torch 2.11's FileSystemWriter writes
// it (docs/from_torchtitan.md, "Your checkpoints"): the .metadata index (dcp_metadata.h), and
// each entry from the __R_S.distcp files, where every tensor chunk and every non-tensor item is
// a whole torch.save archive (torch_save_archive.h). A tensor saved by several ranks is
// assembled from its chunks. Everything is read as data: the pickles inside go through the
// restricted unpickler, and the files are memory-mapped, each byte range checked.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

#include "titan/checkpoint/dcp_metadata.h"
#include "titan/checkpoint/pickle_value.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {

// Whether `dir` is a DCP checkpoint (holds a .metadata file).
bool is_dcp_checkpoint(const std::string& dir);

// torch's dtype names <-> ATen's; nullopt / throws for a dtype titan does not read.
std::optional<at::ScalarType> dcp_dtype(const std::string& name);
std::string dcp_dtype_name(at::ScalarType type);

class DcpReader {
 public:
  explicit DcpReader(std::string dir);

  const std::string& dir() const { return dir_; }
  const DcpMetadata& metadata() const { return metadata_; }

  // The whole tensor, assembled from its chunks, in its saved dtype, on the CPU. Throws
  // naming the entry and file when a chunk is missing, out of bounds or of another dtype.
  at::Tensor tensor(const std::string& fqn) const;
  // A non-tensor item's value (plain data only).
  pickle::ValuePtr item(const std::string& fqn) const;

 private:
  const MappedFile& file(const std::string& relative_path) const;
  std::string dir_;
  DcpMetadata metadata_;
  mutable std::map<std::string, std::shared_ptr<const MappedFile>> files_;
};

}  // namespace titan::checkpoint
