// The native Qwen3 / Qwen3-MoE model (docs/qwen3.md): the shared decoder (common/decoder.h)
// with Qwen3's parts: per-head RMSNorms of q and k, default or YaRN rotary embedding, and in
// each layer either the dense SwiGLU feed-forward or the routed experts (decoder_sparse_step,
// mlp_only_layers). Everything else is the decoder's.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "titan/models/common/decoder.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::models {

using Qwen3Options = BalancingOptions;

// Qwen3's numbers as the decoder takes them; throws naming an impossible field.
DecoderConfig qwen3_decoder_config(const Qwen3Args& args, const Qwen3Options& options);

class Qwen3Model : public Decoder {
 public:
  Qwen3Model(const Qwen3Args& args, const Qwen3Options& options, const BuildOptions& build)
      : Decoder(qwen3_decoder_config(args, options), build), args_(args) {}

  nlohmann::json hf_config(const std::string& dtype) const override {
    return qwen3_args_to_hf_config(args_, dtype);
  }
  const Qwen3Args& args() const { return args_; }
  const Qwen3Options& options() const { return config().balancing; }

 private:
  Qwen3Args args_;
};

}  // namespace titan::models
