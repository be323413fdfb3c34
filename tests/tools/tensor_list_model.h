// A test-only Model that is just a list of named tensors and a config.json: enough for the HF
// export code (which only needs named_parameters and hf_config) before a real model exists.
#pragma once

#include <utility>

#include "titan/common/error.h"
#include "titan/models/model_spec.h"

namespace titan::test_support {

class TensorListModel : public models::Model {
 public:
  TensorListModel(NamedTensors tensors, nlohmann::json config)
      : tensors_(std::move(tensors)), config_(std::move(config)) {}

  models::ModelOutput forward(const at::Tensor&) override {
    fail("TensorListModel has no forward");
  }
  at::Tensor output_weight() override { fail("TensorListModel has no output"); }
  NamedTensors named_parameters() override { return tensors_; }
  nlohmann::json hf_config(const std::string& dtype) const override {
    nlohmann::json config = config_;
    config["torch_dtype"] = dtype;
    return config;
  }

 private:
  NamedTensors tensors_;
  nlohmann::json config_;
};

// A spec whose adapter passes names through unchanged (the tensors already have HF names).
inline models::ModelSpec identity_spec() {
  models::ModelSpec spec;
  spec.name = "tensor_list";
  spec.adapter.to_hf = [](const NamedTensors& native) { return native; };
  return spec;
}

}  // namespace titan::test_support
