#include "titan/models/common/feed_forward.h"

#include "titan/kernels/override_resolver.h"

namespace titan::models {

using kernels::Op;

FeedForward::FeedForward(int64_t hidden_size, int64_t intermediate_size, const std::string& path,
                         const at::TensorOptions& options, kernels::OverrideResolver& overrides) {
  gate_proj_.weight = at::empty({intermediate_size, hidden_size}, options);
  up_proj_.weight = at::empty({intermediate_size, hidden_size}, options);
  down_proj_.weight = at::empty({hidden_size, intermediate_size}, options);
  const std::string site = path + ".feed_forward";
  swiglu_ = overrides.function<Op::kSwiglu>(site);
  for (auto& [name, linear] : projections())
    linear->nf4_linear = overrides.function<Op::kNf4Linear>(site + "." + name.substr(4));
}

std::vector<std::pair<std::string, Linear*>> FeedForward::projections() {
  return {
      {"mlp.gate_proj", &gate_proj_}, {"mlp.up_proj", &up_proj_}, {"mlp.down_proj", &down_proj_}};
}

void FeedForward::visit_parameters(const std::string& prefix, const ParameterVisitor& f) {
  gate_proj_.visit(prefix + "gate_proj", f);
  up_proj_.visit(prefix + "up_proj", f);
  down_proj_.visit(prefix + "down_proj", f);
}

at::Tensor FeedForward::forward(const at::Tensor& x) const {
  if (gate_proj_.plain() && up_proj_.plain() && down_proj_.plain())
    return swiglu_(x, gate_proj_.weight, up_proj_.weight, down_proj_.weight);
  return down_proj_.project(at::silu(gate_proj_.project(x)) * up_proj_.project(x));
}

}  // namespace titan::models
