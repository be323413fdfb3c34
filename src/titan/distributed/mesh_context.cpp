#include "titan/distributed/mesh_context.h"

namespace titan::distributed {

MeshContext::MeshContext(std::unique_ptr<DeviceMesh> mesh, DataParallelOptions data_parallel)
    : mesh_(std::move(mesh)) {
  if (mesh_->dims().data_parallel())
    data_parallel_ = std::make_unique<DataParallel>(*mesh_, placements_, data_parallel);
}

void MeshContext::fully_shard(const std::vector<models::Module*>& modules,
                              const models::ShardOptions& options) {
  if (data_parallel_) data_parallel_->wrap(modules, options);
}

}  // namespace titan::distributed
