#include "titan/transformers_backend/pretrained_shares.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"

namespace titan::transformers_backend {

PretrainedShares::PretrainedShares(TransformersModel& model) : model_(model) {
  if (model.weights_dir().empty()) return;
  files_.emplace(checkpoint::SafetensorsDirectory::open(model.weights_dir()));
  at::NoGradGuard no_grad;
  for (models::Module* m : model.modules())
    m->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      // (helper.py checked every name and shape against the checkpoint while building.)
      const at::Tensor view = files_->tensor(name);
      TITAN_CHECK(view.sizes() == slot.sizes(), model.weights_dir(), ": ", name, " has shape ",
                  view.sizes(), ", the model expects ", slot.sizes());
      kept_[name] = {slot.options(), slot.requires_grad(), view.storage().data()};
      // The uninitialised storage the trainer gave the slot is let go of untouched.
      slot = view.detach();
    });
}

void PretrainedShares::own() {
  if (!files_) return;
  at::NoGradGuard no_grad;
  for (models::Module* m : model_.modules())
    m->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      const auto it = kept_.find(name);
      if (it == kept_.end()) return;
      // A piece parallelism kept is this rank's own already; a whole tensor still views the
      // read-only file. Either is copied when its dtype or device is not the slot's.
      const Kept& kept = it->second;
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
