// Stateful: a part of training that a checkpoint saves and a resume restores (torchtitan's
// Stateful objects in its CheckpointManager). The trainer declares its parts once, by name
// (model, optimizer, lr_scheduler, dataloader, train_state, rng); the checkpoint manager saves
// and restores that list, and checkpoint.exclude_from_loading names entries of it.
//
// A part's state is tensors (each rank's local pieces; the checkpoint layout says which box of
// which global tensor each is) and a JSON object. On load it reads back through a PartReader,
// which fills a local tensor with exactly the box this rank holds, whatever layout saved it.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "titan/common/named_tensors.h"

namespace titan::train {

struct PartState {
  NamedTensors tensors;  // local tensors (pieces, with the layout's padding)
  nlohmann::json state;  // null: none
};

// A saved part, as this rank reads it.
class PartReader {
 public:
  virtual ~PartReader() = default;
  // The checkpoint folder, for messages.
  virtual const std::string& source() const = 0;
  // The part's JSON state (null when it saved none).
  virtual nlohmann::json state() const = 0;
  virtual std::vector<std::string> names() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  virtual std::vector<int64_t> global_shape(const std::string& name) const = 0;
  // Fills `local` (laid out as the layout says tensor `name` is) with its box; its padding
  // with zeros. Throws naming the tensor when the global shapes differ.
  virtual void read_into(const std::string& name, at::Tensor& local) const = 0;
  // The whole tensor.
  virtual at::Tensor read(const std::string& name) const = 0;
};

class Stateful {
 public:
  virtual ~Stateful() = default;
  virtual PartState save() const = 0;
  // Restores from `in`; called only when the part is not excluded from loading.
  virtual void load(const PartReader& in) = 0;
};

}  // namespace titan::train
