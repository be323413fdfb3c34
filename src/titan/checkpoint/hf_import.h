// Hugging Face import: config.json and safetensors weights of a model directory into a
// built model, through the model spec's state-dict adapter (docs/qwen3.md section 5.2, 5.3).
//
// The weights are read tensor by tensor from the memory-mapped shards: a load holds the model
// and at most one checkpoint tensor being converted, never a second copy of the model.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "titan/checkpoint/safetensors.h"
#include "titan/checkpoint/tensor_layout.h"
#include "titan/models/model_spec.h"

namespace titan::checkpoint {

// <dir>/config.json parsed; a missing file or invalid JSON throws titan::Error naming it.
nlohmann::json read_hf_config(const std::string& dir);

// The weights of a Hugging Face directory under a model's native names. Opening checks every
// tensor the model needs (missing, unexpected, mis-shaped or non-floating tensors, all named
// in one titan::Error) before any value is read.
class HfWeights {
 public:
  // `expected`: the model's parameters by native name, with their whole (global) shapes; meta
  // tensors will do.
  HfWeights(const std::string& dir, const models::ModelSpec& spec, const NamedTensors& expected);

  // The values of one parameter (a view of the mapped file where the checkpoint holds the
  // tensor as is; a fused expert stack is assembled), in the checkpoint's dtype.
  at::Tensor read(const std::string& name) const;
  // Drops the mapped pages read so far from this process's resident memory.
  void release_pages() const { files_.release_pages(); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  SafetensorsDirectory files_;
  std::map<std::string, models::LazyTensor> tensors_;
};

// Loads model.safetensors (or the sharded index) of `dir` into `model`'s parameters, casting
// to their dtype/device; with a sharded `layout`, each parameter gets the rows this rank holds;
// a pipeline stage reads its own parameters (the checkpoint is checked against the whole
// model's, Model::initialisation_order).
// Every tensor is checked before the first parameter is written: on any error (missing,
// unexpected or mis-shaped tensors, named) the model is left unchanged.
void load_hf_weights(models::ModelTensors& model, const models::ModelSpec& spec,
                     const std::string& dir, const TensorLayout& layout = whole_tensors());

}  // namespace titan::checkpoint
