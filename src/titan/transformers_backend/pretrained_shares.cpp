#include "titan/transformers_backend/pretrained_shares.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <variant>

#include "titan/common/error.h"

namespace py = pybind11;

namespace titan::transformers_backend {

PretrainedShares::PretrainedShares(TransformersModel& model, models::ParallelContext& parallel)
    : model_(model) {
  if (model.weights_dir().empty()) return;
  files_.emplace(checkpoint::SafetensorsDirectory::open(model.weights_dir()));
  expert_ranks_ = parallel.degree("ep");
  expert_rank_ = parallel.coordinate("ep");
  // Where each parameter is (helper.py, checkpoint_plan, which checked every name and shape).
  std::map<std::string, std::variant<std::string, Stack>> plan;
  {
    py::gil_scoped_acquire gil;
    for (const auto& [name, where] : py::dict(model.python_model().attr("_titan_weights_plan"))) {
      if (py::isinstance<py::str>(where)) {
        plan[name.cast<std::string>()] = where.cast<std::string>();
      } else {
        const py::tuple t = where.cast<py::tuple>();
        plan[name.cast<std::string>()] =
            Stack{t[0].cast<std::vector<std::vector<std::string>>>(), t[1].cast<int64_t>()};
      }
    }
  }
  at::NoGradGuard no_grad;
  for (models::Module* m : model.modules())
    m->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      const auto it = plan.find(name);
      TITAN_CHECK(it != plan.end(), model.weights_dir(), ": no tensor for ", name);
      Kept kept{slot.options(), slot.requires_grad()};
      if (const auto* stack = std::get_if<Stack>(&it->second)) {
        kept.some_experts = fill_experts(name, *stack, slot);
      } else {
        const at::Tensor view = files_->tensor(std::get<std::string>(it->second));
        TITAN_CHECK(view.sizes() == slot.sizes(), model.weights_dir(), ": ", name, " has shape ",
                    view.sizes(), ", the model expects ", slot.sizes());
        kept.file = view.storage().data();
        // The uninitialised storage the trainer gave the slot is let go of untouched.
        slot = view.detach();
      }
      kept_[name] = kept;
    });
}

bool PretrainedShares::fill_experts(const std::string& name, const Stack& stack, at::Tensor& slot) {
  const auto experts = static_cast<int64_t>(stack.keys.size());
  TITAN_CHECK(slot.dim() >= 1 && slot.size(0) == experts, model_.weights_dir(), ": ", experts,
              " experts for ", name, " of shape ", slot.sizes());
  // Expert parallelism keeps experts [first, first + per_rank) here (an even split on dim 0);
  // the other rows of the slot's storage are never touched. (Experts that ep does not divide
  // are all read: expert parallelism refuses them next.)
  const bool split = expert_ranks_ > 1 && experts % expert_ranks_ == 0;
  const int64_t per_rank = split ? experts / expert_ranks_ : experts;
  const int64_t first = split ? expert_rank_ * per_rank : 0;
  for (int64_t e = first; e < first + per_rank; ++e) {
    int64_t offset = 0;
    for (const std::string& key : stack.keys[e]) {
      const at::Tensor source = files_->tensor(key);
      const int64_t length = source.size(stack.dim);
      slot[e].narrow(stack.dim, offset, length).copy_(source);
      offset += length;
    }
    TITAN_CHECK(offset == slot.size(stack.dim + 1), model_.weights_dir(), ": the sources of ", name,
                " fill ", offset, " of its ", slot.size(stack.dim + 1), " rows");
  }
  return split;
}

void PretrainedShares::own(const std::vector<std::string>& expert_stacks) {
  if (!files_) return;
  at::NoGradGuard no_grad;
  for (models::Module* m : model_.modules())
    m->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      const auto it = kept_.find(name);
      if (it == kept_.end()) return;
      const Kept& kept = it->second;
      TITAN_CHECK(!kept.some_experts || std::find(expert_stacks.begin(), expert_stacks.end(),
                                                  name) != expert_stacks.end(),
                  name,
                  " was read for this rank's experts only, but expert parallelism did not "
                  "split it");
      // A piece parallelism kept is this rank's own already; a whole tensor still views the
      // read-only file. Either is copied when its dtype or device is not the slot's.
      const bool own_already = slot.storage().data() != kept.file && slot.is_contiguous() &&
                               slot.scalar_type() == kept.options.dtype().toScalarType() &&
                               slot.device() == kept.options.device();
      if (own_already) {
        slot.requires_grad_(kept.grad);
        return;
      }
      at::Tensor owned = at::empty(slot.sizes(), kept.options);
      owned.copy_(slot);
      slot = owned.requires_grad_(kept.grad);
    });
  files_->release_pages();
  files_.reset();
  model_.weights_read();
}

}  // namespace titan::transformers_backend
