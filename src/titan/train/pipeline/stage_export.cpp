#include "titan/train/pipeline/stage_export.h"

#include <ATen/core/grad_mode.h>

#include <map>

#include "titan/common/error.h"

namespace titan::train {

checkpoint::NativeTensors pipeline_parameters(models::ModelTensors& model,
                                              const checkpoint::TensorLayout& layout,
                                              const StageTensors& holders, distributed::Group& pp,
                                              at::Device device) {
  std::map<std::string, at::Tensor> held;
  for (const auto& [name, t] : model.named_parameters()) held[name] = t;
  checkpoint::NativeTensors out;
  std::vector<at::Tensor> locals;  // this rank's tensor, or undefined
  for (const auto& [name, t] : model.initialisation_order()) {
    auto it = held.find(name);
    const at::Tensor local = it != held.end() ? it->second : at::Tensor();
    const std::vector<int64_t> shape =
        local.defined() ? layout.piece(name, local).global_shape : t.sizes().vec();
    out.metas.emplace_back(name, at::empty(shape, t.options().device(at::kMeta)));
    locals.push_back(local);
  }
  out.full = [&layout, &holders, &pp, device, names = out.metas, locals](size_t i) -> at::Tensor {
    at::NoGradGuard no_grad;
    const std::string& name = names[i].first;
    const int64_t holder = holders.holder(name);
    TITAN_CHECK(holder >= 0, "export: no pipeline stage holds ", name);
    at::Tensor whole =
        locals[i].defined()
            ? layout.full(name, locals[i]).detach().clone()  // the broadcast writes into it
            : at::empty(names[i].second.sizes(), names[i].second.options().device(device));
    pp.broadcast(whole, holder);
    return whole;
  };
  return out;
}

}  // namespace titan::train
