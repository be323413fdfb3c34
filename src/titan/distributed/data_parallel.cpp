#include "titan/distributed/data_parallel.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/distributed/backward_hook.h"

namespace titan::distributed {
namespace {

// The gathered parameters' memory comes and goes while the tensors that autograd saved keep
// pointing at the same storage: freeing sets the storage to zero bytes, gathering allocates it
// again and writes into it (FSDP2 resizes storage the same way).
void free_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == 0) return;
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void allocate_storage(const at::Tensor& t, size_t nbytes) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == nbytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

std::vector<int64_t> with_rows(c10::IntArrayRef shape, int64_t rows) {
  std::vector<int64_t> out = shape.vec();
  out[0] = rows;
  return out;
}

}  // namespace

struct DataParallel::Param {
  std::string name;
  at::Tensor* slot = nullptr;          // in its module
  std::vector<int64_t> local_shape;    // before FSDP: what the forward's weight looks like
  std::shared_ptr<Group> shard_group;  // dp_shard (dp_shard_cp), or efsdp for expert weights
  EvenSplit rows;                      // FSDP's split of dim 0 of that (part == rows: whole)
  at::Tensor shard;     // FSDP: the optimizer's leaf [part_rows, ...]; DDP: the parameter
  at::Tensor buffer;    // FSDP: [parts * part_rows, ...] in the compute dtype
  at::Tensor gathered;  // FSDP: a leaf viewing buffer's first `rows` rows (the forward's weight)
  size_t buffer_bytes = 0;
  bool frozen = false;  // LoRA's base weights: gathered for the forward, never reduced
  bool sharded() const { return shard_group->size() > 1; }
};

// The sharded parameters of a unit that share a shard group, and their collectives in flight.
struct DataParallel::Batch {
  std::shared_ptr<Group> group;
  std::vector<size_t> params;   // indices into the unit's params
  std::vector<size_t> trained;  // those that are not frozen: their gradients are reduced
  Group::Pending gathering;
  std::vector<at::Tensor> gather_inputs;  // alive until the all-gather completes
  Group::Pending reducing;
  std::vector<at::Tensor> reduce_inputs, reduce_outputs;
};

struct DataParallel::Unit {
  std::vector<models::Module*> modules;
  std::vector<Param> params;
  std::vector<Batch> batches;  // of the sharded params, by shard group, in first-seen order
  bool reshard_after_forward = true;
  int64_t order = -1;  // position in the forward order, once known
  bool gathered = false;
  bool gathering = false;
  int post_backward_calls = 0;  // modules of the unit whose backward is done
  bool reduced = false;         // this backward's gradients are reduced or in flight
  // DDP: the whole parameters' gradients, all-reduced over the replicate group.
  Group::Pending replicating;
  std::vector<at::Tensor> replicate_inputs;
  bool any_sharded() const { return !batches.empty(); }
};

DataParallel::DataParallel(const DeviceMesh& mesh, ParameterPlacements& placements,
                           DataParallelOptions options)
    : mesh_(mesh),
      replicate_(mesh.group("dp_replicate")),
      placements_(placements),
      options_(options) {}

DataParallel::~DataParallel() = default;

bool DataParallel::sharded() const {
  for (const auto& unit : units_)
    if (unit->any_sharded()) return true;
  return mesh_.size("dp_shard") > 1 || mesh_.size("cp") > 1;
}

void DataParallel::wrap(const std::vector<models::Module*>& modules,
                        const models::ShardOptions& options) {
  TITAN_CHECK(!modules.empty(), "data parallelism: a unit needs at least one module");
  auto unit = std::make_unique<Unit>();
  unit->modules = modules;
  unit->reshard_after_forward = options.reshard_after_forward;
  at::NoGradGuard no_grad;
  for (models::Module* module : modules) {
    module->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      TITAN_CHECK(!by_name_.count(name), "data parallelism: parameter ", name,
                  " belongs to two units");
      TITAN_CHECK(slot.dim() >= 1, "data parallelism: parameter ", name,
                  " is a scalar; FSDP shards on dim 0");
      Param p;
      p.name = name;
      p.slot = &slot;
      p.frozen = !slot.requires_grad();
      p.local_shape = slot.sizes().vec();
      // Expert weights are sharded over what expert parallelism leaves of dp_shard x cp x tp
      // (efsdp); dense ones over dp_shard, and the cp ranks too under context parallelism.
      const std::string shard_dim = options.expert && options.expert(name) ? "efsdp"
                                    : mesh_.size("cp") > 1                 ? "dp_shard_cp"
                                                                           : "dp_shard";
      p.shard_group = mesh_.group(shard_dim);
      const int64_t parts = p.shard_group->size(), index = p.shard_group->rank();
      p.rows = even_split(slot.size(0), parts, index);
      // The placement it had (tensor or expert parallelism), or whole; then FSDP's and DDP's.
      const TensorPlacement* before = placements_.find(name);
      TensorPlacement placement = before ? *before : TensorPlacement{p.local_shape, {}};
      if (p.sharded()) placement = placement.then({shard_dim, parts, index, Placement::shard(0)});
      if (replicate_->size() > 1)
        placement = placement.then(
            {"dp_replicate", replicate_->size(), replicate_->rank(), Placement::replicate()});
      placements_.set(name, placement);
      if (p.sharded()) {
        // The master shard: this rank's rows, zero-padded to the part's rows.
        at::Tensor local = at::zeros(with_rows(slot.sizes(), p.rows.part), slot.options());
        local.narrow(0, 0, p.rows.real).copy_(slot.narrow(0, p.rows.begin, p.rows.real));
        p.shard = local.requires_grad_(!p.frozen);
        p.buffer = at::empty(with_rows(slot.sizes(), parts * p.rows.part),
                             slot.options().dtype(options_.param_dtype));
        p.buffer_bytes = p.buffer.storage().nbytes();
        // The forward's weight: the first `rows` rows of the buffer's storage, as a leaf of its
        // own. Not a view (a view shares the buffer's version counter, which every all-gather
        // into the buffer bumps, and autograd would then reject the tensors it saved). Made
        // while the storage exists (shapes are checked against it), then freed.
        p.gathered = at::empty({0}, p.buffer.options());
        p.gathered.set_(p.buffer.storage(), 0, p.local_shape, p.buffer.strides());
        p.gathered.requires_grad_(!p.frozen);
        free_storage(p.buffer);
        slot = p.shard;
        auto batch = std::find_if(unit->batches.begin(), unit->batches.end(),
                                  [&](const Batch& b) { return b.group == p.shard_group; });
        if (batch == unit->batches.end()) {
          unit->batches.push_back(Batch{});
          unit->batches.back().group = p.shard_group;
          batch = std::prev(unit->batches.end());
        }
        batch->params.push_back(unit->params.size());
        if (!p.frozen) batch->trained.push_back(unit->params.size());
      } else {
        p.shard = slot;
      }
      by_name_[name] = {unit.get(), unit->params.size()};
      unit->params.push_back(std::move(p));
    });
  }
  Unit* raw = unit.get();
  units_.push_back(std::move(unit));
  for (models::Module* module : modules) {
    module->add_wrapper([this, raw](models::Module&, const models::Tensors& inputs,
                                    const models::ForwardFn& inner) {
      pre_forward(*raw);
      // The hook on the inputs fires when this module's backward is done; the one on the
      // outputs when it is about to start.
      const models::Tensors hooked_inputs =
          with_backward_hook(inputs, [this, raw] { post_backward(*raw); });
      models::Tensors outputs = inner(hooked_inputs);
      outputs = with_backward_hook(outputs, [this, raw] { pre_backward(*raw); });
      post_forward(*raw);
      return outputs;
    });
  }
}

DataParallel::Unit* DataParallel::neighbour(const Unit& unit, int step) const {
  const int64_t at = unit.order + step;
  if (unit.order < 0 || at < 0 || at >= static_cast<int64_t>(forward_order_.size())) return nullptr;
  return forward_order_[at];
}

void DataParallel::start_gather(Unit& unit) {
  if (!unit.any_sharded() || unit.gathered || unit.gathering) return;
  at::NoGradGuard no_grad;
  for (Batch& batch : unit.batches) {
    std::vector<at::Tensor> outputs;
    batch.gather_inputs.clear();
    for (size_t i : batch.params) {
      Param& p = unit.params[i];
      allocate_storage(p.buffer, p.buffer_bytes);
      outputs.push_back(p.buffer);
      batch.gather_inputs.push_back(p.shard.detach().to(options_.param_dtype).contiguous());
    }
    batch.gathering = batch.group->all_gather_async(outputs, batch.gather_inputs);
  }
  unit.gathering = true;
}

void DataParallel::finish_gather(Unit& unit) {
  if (!unit.any_sharded() || unit.gathered) return;
  start_gather(unit);
  for (Batch& batch : unit.batches) {
    batch.gathering.wait();
    batch.gather_inputs.clear();
    for (size_t i : batch.params) *unit.params[i].slot = unit.params[i].gathered;
  }
  unit.gathering = false;
  unit.gathered = true;
}

void DataParallel::reshard(Unit& unit) {
  if (!unit.any_sharded()) return;
  for (Batch& batch : unit.batches) {
    batch.gathering.wait();  // a prefetch may still be writing into the buffers
    batch.gather_inputs.clear();
    for (size_t i : batch.params) {
      Param& p = unit.params[i];
      free_storage(p.buffer);
      *p.slot = p.shard;
    }
  }
  unit.gathering = false;
  unit.gathered = false;
}

void DataParallel::pre_forward(Unit& unit) {
  if (unit.order < 0) {
    unit.order = static_cast<int64_t>(forward_order_.size());
    forward_order_.push_back(&unit);
  }
  finish_gather(unit);
  // Overlap: the next unit's parameters travel while this one computes.
  if (Unit* next = neighbour(unit, +1)) start_gather(*next);
}

void DataParallel::post_forward(Unit& unit) {
  if (unit.reshard_after_forward && unit.modules.size() == 1) reshard(unit);
}

void DataParallel::pre_backward(Unit& unit) {
  finish_gather(unit);
  // Backward runs the units in reverse: the previous one comes next.
  if (Unit* previous = neighbour(unit, -1)) start_gather(*previous);
}

void DataParallel::post_backward(Unit& unit) {
  // A unit of several modules (a tied embedding with the head) is done only when all of them
  // are; finish_backward() catches the ones whose inputs need no gradient.
  if (++unit.post_backward_calls < static_cast<int>(unit.modules.size())) return;
  reduce(unit);
}

void DataParallel::reduce(Unit& unit) {
  if (unit.reduced) return;
  unit.reduced = true;
  at::NoGradGuard no_grad;
  for (Batch& batch : unit.batches) {
    batch.reduce_inputs.clear();
    batch.reduce_outputs.clear();
    if (batch.trained.empty()) continue;  // every rank skips it alike
    for (size_t i : batch.trained) {
      Param& p = unit.params[i];
      // Every rank passes the same list, with zeros for a gradient that did not arise here.
      at::Tensor padded = at::zeros(with_rows(p.buffer.sizes(), p.buffer.size(0)),
                                    p.buffer.options().dtype(options_.reduce_dtype));
      const at::Tensor grad = p.gathered.grad();
      if (grad.defined()) padded.narrow(0, 0, p.local_shape[0]).copy_(grad);
      p.gathered.mutable_grad() = at::Tensor();
      batch.reduce_inputs.push_back(padded);
      batch.reduce_outputs.push_back(
          at::empty(with_rows(padded.sizes(), p.rows.part), padded.options()));
    }
    batch.reducing = batch.group->reduce_scatter_async(batch.reduce_outputs, batch.reduce_inputs);
  }
  if (unit.any_sharded()) reshard(unit);
  // The whole parameters: DDP, on the last micro-batch of a step (accumulated locally before).
  if (!sync_ || replicate_->size() == 1) return;
  unit.replicate_inputs.clear();
  for (Param& p : unit.params) {
    if (p.sharded() || p.frozen) continue;
    if (!p.shard.grad().defined()) p.shard.mutable_grad() = at::zeros_like(p.shard);
    unit.replicate_inputs.push_back(p.shard.grad());
  }
  if (!unit.replicate_inputs.empty())
    unit.replicating = replicate_->all_reduce_async(unit.replicate_inputs);
}

void DataParallel::finish_backward() {
  // Units the hooks did not reach, in backward order.
  for (auto it = forward_order_.rbegin(); it != forward_order_.rend(); ++it) reduce(**it);
  for (auto& unit : units_) reduce(*unit);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> shard_grads;
  for (auto& owned : units_) {
    Unit* unit = owned.get();
    for (Batch& batch : unit->batches) {
      batch.reducing.wait();
      for (size_t j = 0; j < batch.reduce_outputs.size(); ++j) {
        Param& p = unit->params[batch.trained[j]];
        const at::Tensor summed = batch.reduce_outputs[j].to(p.shard.scalar_type());
        if (p.shard.grad().defined()) {
          p.shard.mutable_grad().add_(summed);
        } else {
          p.shard.mutable_grad() = summed;
        }
        shard_grads.push_back(p.shard.grad());
      }
      batch.reduce_inputs.clear();
      batch.reduce_outputs.clear();
    }
    unit->replicating.wait();
    unit->replicate_inputs.clear();
    unit->reduced = false;
    unit->post_backward_calls = 0;
    reshard(*unit);
  }
  // HSDP: the shard gradients of a step are summed over the replicas once, at its end.
  if (sync_ && replicate_->size() > 1 && !shard_grads.empty()) replicate_->all_reduce(shard_grads);
}

void DataParallel::finish_forward_only() {
  for (auto& unit : units_) reshard(*unit);
}

}  // namespace titan::distributed
