// The native Llama 3 model (docs/llama3.md): the shared decoder (common/decoder.h) with Llama's
// parts: no q/k norm, the default or Llama 3.1-scaled rotary embedding, the dense SwiGLU
// feed-forward in every layer. Everything else is the decoder's.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "titan/models/common/decoder.h"
#include "titan/models/llama3/llama3_args.h"

namespace titan::models {

// Llama 3's numbers as the decoder takes them; throws naming an impossible field.
DecoderConfig llama3_decoder_config(const Llama3Args& args);

class Llama3Model : public Decoder {
 public:
  Llama3Model(const Llama3Args& args, const BuildOptions& build)
      : Decoder(llama3_decoder_config(args), build), args_(args) {}

  nlohmann::json hf_config(const std::string& dtype) const override {
    return llama3_args_to_hf_config(args_, dtype);
  }
  const Llama3Args& args() const { return args_; }

 private:
  Llama3Args args_;
};

}  // namespace titan::models
