#include "titan/train/state/optimizer_state_reader.h"

#include <map>
#include <set>

#include "titan/common/error.h"
#include "titan/distributed/parameter_placements.h"
#include "titan/kernels/blockwise_8bit.h"
#include "titan/train/block_layout.h"
#include "titan/train/optimizer_state_names.h"

namespace titan::train {

NamedTensors read_optimizer_state(const PartReader& in, const AdamW& optimizer,
                                  const NamedTensors& params,
                                  const std::function<bool(const std::string&)>& held_elsewhere) {
  namespace names = optimizer_state;
  std::map<std::string, at::Tensor> by_name(params.begin(), params.end());
  NamedTensors state;
  std::set<std::pair<std::string, std::string>> read_whole;  // (param, moment)
  for (const std::string& name : in.names()) {
    const auto key = names::parse(name);
    if (key && held_elsewhere && held_elsewhere(key->param)) continue;  // another stage's
    const auto it = key ? by_name.find(key->param) : by_name.end();
    if (it == by_name.end() || key->field == names::kStep) {
      state.emplace_back(name, in.read(name));  // AdamW::load_state names what does not belong
      continue;
    }
    const at::Tensor& p = it->second;
    const at::TensorOptions options = p.options().requires_grad(false);
    at::Tensor local;
    if (names::is_moment(key->field)) {
      local = at::empty_like(p, options);
    } else if (names::is_codes(key->field)) {
      local = at::empty(p.sizes(), options.dtype(at::kByte));
    } else {  // an absmax
      const TensorPlacement* placement = optimizer.placement_of(key->param);
      if (placement == nullptr || placement->whole()) {
        local = at::empty(absmax_shape(p.sizes().vec(), absmax_by_rows(p.sizes().vec())),
                          options.dtype(at::kFloat));
      } else if (const auto scales = absmax_placement(*placement)) {
        local = at::empty(local_shape(*scales), options.dtype(at::kFloat));
      } else {
        read_whole.insert({key->param, names::moment_of(key->field)});
        continue;
      }
    }
    in.read_into(name, local);
    state.emplace_back(name, local);
  }
  // 8-bit moments this layout cannot read by pieces: dequantised whole, then this rank's piece.
  for (const auto& [param, moment] : read_whole) {
    const bool is_signed = moment == names::kExpAvg;
    const std::string codes =
        names::key(param, is_signed ? names::kExpAvgCodes : names::kExpAvgSqCodes);
    const std::string absmax =
        names::key(param, is_signed ? names::kExpAvgAbsmax : names::kExpAvgSqAbsmax);
    std::erase_if(state, [&](const auto& entry) { return entry.first == codes; });
    TITAN_CHECK(in.contains(codes), in.source(), ": optimizer tensor '", absmax,
                "' has no companion '", codes, "'");
    const at::Tensor whole =
        kernels::dequantize_blockwise(in.read(codes), in.read(absmax).reshape({-1}), is_signed);
    const at::Tensor& p = by_name.at(param);
    state.emplace_back(
        names::key(param, moment),
        distributed::local_piece(*optimizer.placement_of(param), whole).to(p.device()));
  }
  return state;
}

}  // namespace titan::train
