#include "titan/train/state/torchtitan_part_reader.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "titan/checkpoint/training_checkpoint.h"
#include "titan/common/box_tensor.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/train/state/checkpoint_parts.h"

namespace titan::train {
namespace {

// One part of a torchtitan checkpoint in titan's names: the model's tensors, AdamW's state, or
// a part that is JSON state alone (train_state, lr_scheduler).
class TorchtitanPartReader : public PartReader {
 public:
  TorchtitanPartReader(const checkpoint::TorchtitanCheckpointReader& reader, std::string part,
                       const checkpoint::TensorLayout& layout)
      : reader_(reader), part_(std::move(part)), layout_(layout) {}

  const std::string& source() const override { return reader_.dir(); }

  nlohmann::json state() const override {
    if (part_ == checkpoint::kTrainStatePart)
      return {{"step", reader_.step()}, {"tokens_seen", reader_.tokens_seen()}};
    if (part_ == checkpoint::kLrSchedulerPart) return {{"last_step", reader_.lr_last_epoch()}};
    return nullptr;  // the model's: a whole model (not LoRA adapters), described by this run
  }

  std::vector<std::string> names() const override {
    if (part_ == checkpoint::kModelPart) return reader_.model_names();
    if (part_ == checkpoint::kOptimizerPart) return reader_.optimizer_names();
    return {};
  }

  bool contains(const std::string& name) const override {
    const std::vector<std::string> all = names();
    return std::find(all.begin(), all.end(), name) != all.end();
  }

  std::vector<int64_t> global_shape(const std::string& name) const override {
    return read(name).sizes().vec();
  }

  at::Tensor read(const std::string& name) const override {
    if (part_ == checkpoint::kModelPart) return reader_.model_tensor(name);
    if (part_ == checkpoint::kOptimizerPart) return reader_.optimizer_tensor(name);
    fail(reader_.dir(), ": torchtitan's ", part_, " holds no tensor '", name, "'");
  }

  void read_into(const std::string& name, at::Tensor& local) const override {
    const checkpoint::LocalPiece piece = layout_.piece(name, local);
    const at::Tensor whole = read(name);
    TITAN_CHECK(whole.sizes().vec() == piece.global_shape, reader_.dir(), ": ", part_, " tensor '",
                name, "' has shape ", shape_to_string(whole.sizes()), " but this run expects ",
                shape_to_string(piece.global_shape));
    at::NoGradGuard no_grad;
    if (piece.whole) {
      local.copy_(whole);
      return;
    }
    local.zero_();  // the padding
    real_part(local, piece.box).copy_(narrow_to(whole, whole_box(piece.global_shape), piece.box));
  }

 private:
  const checkpoint::TorchtitanCheckpointReader& reader_;
  std::string part_;
  const checkpoint::TensorLayout& layout_;
};

}  // namespace

std::vector<std::string> restore_from_torchtitan(
    const checkpoint::TorchtitanCheckpointReader& reader,
    const std::vector<std::pair<std::string, Stateful*>>& parts,
    const checkpoint::TensorLayout& layout, const std::vector<std::string>& exclude) {
  const auto loads = [&](const std::string& name) {
    return std::find(exclude.begin(), exclude.end(), name) == exclude.end();
  };
  // The reader's notes on the data position matter only when the data loader's part is loaded.
  std::vector<std::string> notes;
  for (const std::string& note : reader.notes())
    if (loads(checkpoint::kDataLoaderPart) || note.find("data position") == std::string::npos)
      notes.push_back(note);
  for (const auto& [name, part] : parts) {
    if (!loads(name)) continue;
    if (name == checkpoint::kRngPart) continue;                      // torchtitan saves none
    if (name != checkpoint::kModelPart && !reader.full()) continue;  // model-only
    if (name == checkpoint::kDataLoaderPart) {
      auto* data = dynamic_cast<DataLoaderState*>(part);
      TITAN_CHECK(data != nullptr, "checkpoint part 'dataloader' is not the data loader's");
      const std::string why = data->load_torchtitan(reader.dataloader());
      if (!why.empty()) notes.push_back("the data position: " + why);
      continue;
    }
    part->load(TorchtitanPartReader(reader, name, layout));
  }
  return notes;
}

}  // namespace titan::train
