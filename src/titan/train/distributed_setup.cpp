#include "titan/train/distributed_setup.h"

#include "titan/train/precision.h"

namespace titan::train {

DistributedSetup check_distributed_layout(const config::TrainerConfig& cfg) {
  DistributedSetup setup;
  setup.env = distributed::launch_env_from_environment();
  setup.dims = distributed::make_parallel_dims(cfg.parallelism, setup.env.world_size);
  return setup;
}

void connect(DistributedSetup& setup, const config::TrainerConfig& cfg, const Precision& precision,
             const std::string& config_text) {
  distributed::WorldOptions options;
  options.cuda = precision.device.is_cuda();
  options.device_index = precision.device.is_cuda() ? precision.device.index() : 0;
  options.init_timeout = std::chrono::seconds(cfg.comm.init_timeout_seconds);
  options.train_timeout = std::chrono::seconds(cfg.comm.train_timeout_seconds);
  setup.world = std::make_unique<distributed::World>(setup.env, options);
  distributed::check_same_config_on_every_rank(*setup.world, config_text);
  setup.groups = distributed::make_data_parallel_groups(*setup.world, setup.dims);
  if (setup.dims.data_parallel()) {
    distributed::DataParallelOptions dp;
    dp.param_dtype = precision.compute_dtype;
    dp.reduce_dtype =
        dtype_from_name(cfg.training.mixed_precision_reduce, "training.mixed_precision_reduce");
    setup.data_parallel = std::make_unique<distributed::DataParallel>(setup.groups, dp);
  }
}

}  // namespace titan::train
