// MeshContext: the ParallelContext (models/parallel_context.h) of a training run, over its
// device mesh. It owns what the parallelisms leave behind: the placement of every parameter
// (parameter_placements.h) and the data-parallel wrapper (data_parallel.h), which the trainer
// drives around each backward. Every parallelism plugs in here: it is one more method of the
// ParallelContext interface, implemented over the mesh's groups, recording the placements it
// gives parameters (docs/distributed.md, "Adding a parallelism").
#pragma once

#include <memory>

#include "titan/distributed/data_parallel.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parameter_placements.h"
#include "titan/models/parallel_context.h"

namespace titan::distributed {

class MeshContext : public models::ParallelContext {
 public:
  MeshContext(std::unique_ptr<DeviceMesh> mesh, DataParallelOptions data_parallel);

  int64_t degree(const std::string& mesh_dim) const override { return mesh_->size(mesh_dim); }
  int64_t coordinate(const std::string& mesh_dim) const override {
    return mesh_->coordinate(mesh_dim);
  }
  bool data_parallel() const override { return data_parallel_ != nullptr; }
  void fully_shard(const std::vector<models::Module*>& modules,
                   const models::ShardOptions& options) override;

  const DeviceMesh& mesh() const { return *mesh_; }
  const ParallelDims& dims() const { return mesh_->dims(); }
  const ParameterPlacements& placements() const { return placements_; }
  // nullptr without data parallelism.
  DataParallel* data_parallel_wrapper() { return data_parallel_.get(); }

 private:
  std::unique_ptr<DeviceMesh> mesh_;
  ParameterPlacements placements_;
  std::unique_ptr<DataParallel> data_parallel_;
};

}  // namespace titan::distributed
