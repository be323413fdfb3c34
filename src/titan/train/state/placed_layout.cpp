#include "titan/train/state/placed_layout.h"

#include "titan/train/block_layout.h"
#include "titan/train/optimizer_state_names.h"

namespace titan::train {

std::optional<TensorPlacement> PlacedLayout::placement_of(const std::string& name) const {
  if (const TensorPlacement* p = parallel_.placements().find(name)) return *p;
  const auto key = optimizer_state::parse(name);
  const TensorPlacement* param = key ? parallel_.placements().find(key->param) : nullptr;
  if (param == nullptr) return std::nullopt;
  if (optimizer_state::is_moment(key->field) || optimizer_state::is_codes(key->field))
    return *param;
  // (nullopt for a parameter whose pieces cut blocks: its states are float32, with no absmax.)
  if (optimizer_state::is_absmax(key->field)) return absmax_placement(*param);
  return std::nullopt;
}

checkpoint::LocalPiece PlacedLayout::piece(const std::string& name, const at::Tensor& local) const {
  checkpoint::LocalPiece piece = TensorLayout::piece(name, local);
  piece.writer = coordinator();
  const std::optional<TensorPlacement> placement = placement_of(name);
  if (!placement) {
    // A parameter's step counter is whole: one rank of the stage that holds the parameter
    // writes it.
    const auto key = optimizer_state::parse(name);
    if (key && key->field == optimizer_state::kStep)
      if (const TensorPlacement* param = parallel_.placements().find(key->param))
        piece.writer = writes_companion(*param);
    return piece;
  }
  piece.global_shape = placement->global_shape;
  piece.box = local_box(*placement);
  piece.whole = placement->whole();
  piece.writer = writes_piece(*placement);
  return piece;
}

at::Tensor PlacedLayout::full(const std::string& name, const at::Tensor& local) const {
  const std::optional<TensorPlacement> placement = placement_of(name);
  if (!placement || placement->whole()) return local;
  return distributed::gather_whole(*placement, local, parallel_.mesh());
}

nlohmann::json PlacedLayout::mesh() const {
  nlohmann::json dims = nlohmann::json::object();
  for (const auto& [name, degree] : parallel_.dims().named()) dims[name] = degree;
  return {{"world_size", parallel_.dims().world_size}, {"dims", dims}};
}

}  // namespace titan::train
