#include "titan/train/distributed_setup.h"

#include <algorithm>

#include "titan/train/context_parallel_batch.h"
#include "titan/train/precision.h"

namespace titan::train {
namespace {

// The data loader's exchange over a group.
class GroupDocumentExchange : public data::DocumentExchange {
 public:
  explicit GroupDocumentExchange(std::shared_ptr<distributed::Group> group)
      : group_(std::move(group)) {}
  int64_t rank() const override { return group_->rank(); }
  int64_t size() const override { return group_->size(); }
  std::vector<std::string> all_gather(const std::string& mine) override {
    return all_gather_strings(*group_, mine);
  }

 private:
  std::shared_ptr<distributed::Group> group_;
};

}  // namespace

std::vector<std::string> all_gather_strings(distributed::Group& group, const std::string& mine,
                                            at::Device device) {
  // Their lengths first, then the bytes padded to the longest.
  const at::Tensor length = at::tensor({static_cast<int64_t>(mine.size())}, at::kLong).to(device);
  std::vector<int64_t> lengths;
  for (const at::Tensor& l : group.all_gather(length)) lengths.push_back(l.item<int64_t>());
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  at::Tensor bytes = at::zeros({longest}, at::kByte);
  std::copy(mine.begin(), mine.end(), reinterpret_cast<char*>(bytes.data_ptr<uint8_t>()));
  const std::vector<at::Tensor> all = group.all_gather(bytes.to(device));
  std::vector<std::string> out;
  for (size_t m = 0; m < all.size(); ++m) {
    const at::Tensor piece = all[m].to(at::kCPU).contiguous();
    const char* data = reinterpret_cast<const char*>(piece.data_ptr<uint8_t>());
    out.emplace_back(data, data + lengths[m]);
  }
  return out;
}

DistributedSetup check_distributed_layout(const config::TrainerConfig& cfg) {
  DistributedSetup setup;
  setup.env = distributed::launch_env_from_environment();
  setup.dims = distributed::make_parallel_dims(cfg.parallelism, setup.env.world_size);
  check_context_parallel(cfg);
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
}

std::unique_ptr<distributed::MeshContext> build_parallel_context(DistributedSetup& setup,
                                                                 const config::TrainerConfig& cfg,
                                                                 const Precision& precision) {
  auto mesh = setup.env.multi_process()
                  ? std::make_unique<distributed::DeviceMesh>(*setup.world, setup.dims)
                  : std::make_unique<distributed::DeviceMesh>(setup.dims);
  distributed::DataParallelOptions dp;
  dp.param_dtype = precision.compute_dtype;
  dp.reduce_dtype =
      dtype_from_name(cfg.training.mixed_precision_reduce, "training.mixed_precision_reduce");
  distributed::SequenceOptions sequence;
  sequence.seq_len = cfg.training.seq_len;
  sequence.balancer =
      distributed::parse_load_balancer(cfg.parallelism.context_parallel_load_balancer);
  sequence.sequence_parallel = cfg.parallelism.enable_sequence_parallel;
  return std::make_unique<distributed::MeshContext>(std::move(mesh), dp, sequence);
}

std::shared_ptr<data::DocumentExchange> document_exchange(const distributed::DeviceMesh& mesh) {
  return std::make_shared<GroupDocumentExchange>(mesh.group("data"));
}

}  // namespace titan::train
