// The named Llama 3 flavors: the published sizes (meta-llama/Llama-3.2-1B, -3.2-3B, -3.1-8B,
// -3.1-70B, their config.json values) and a debug model with the Qwen3 tokenizer's vocabulary,
// so it trains on the default assets.
#include <map>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/models/llama3/llama3_args.h"

namespace titan::models {
namespace {

Llama3Args official(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                    int64_t head_dim, double rope_factor, bool tie) {
  Llama3Args a;  // the defaults are the shared values: vocabulary, 8 kv heads, RoPE, eps
  a.hidden_size = hidden;
  a.intermediate_size = intermediate;
  a.num_hidden_layers = layers;
  a.num_attention_heads = heads;
  a.head_dim = head_dim;
  a.rope_factor = rope_factor;
  a.tie_word_embeddings = tie;
  a.bos_token_id = 128000;
  a.eos_token_id = {128001};
  return a;
}

const std::map<std::string, Llama3Args>& flavors() {
  static const std::map<std::string, Llama3Args> table = [] {
    std::map<std::string, Llama3Args> t;
    // torchtitan's llama3 debugmodel (dim 256, 6 layers, 16 heads, theta 500000) with grouped
    // kv heads and the Qwen3 tokenizer's vocabulary and token ids; the head tied, as small
    // Llama 3.2s are, and Llama 3.1's RoPE scaling.
    Llama3Args debug = official(256, 768, 6, 16, 16, 8.0, true);
    debug.num_key_value_heads = 8;
    debug.vocab_size = 151936;
    debug.bos_token_id = 151643;
    debug.eos_token_id = {151645};
    t["debugmodel"] = debug;
    t["1B"] = official(2048, 8192, 16, 32, 64, 32.0, true);
    t["3B"] = official(3072, 8192, 28, 24, 128, 32.0, true);
    t["8B"] = official(4096, 14336, 32, 32, 128, 8.0, false);
    t["70B"] = official(8192, 28672, 80, 64, 128, 8.0, false);
    return t;
  }();
  return table;
}

}  // namespace

Llama3Args llama3_flavor(const std::string& name) {
  const auto& table = flavors();
  auto it = table.find(name);
  if (it == table.end()) {
    fail("unknown Llama 3 flavor '", name, "' (known: ", join(llama3_flavor_names()), ", or auto)");
  }
  return it->second;
}

std::vector<std::string> llama3_flavor_names() { return {"debugmodel", "1B", "3B", "8B", "70B"}; }

}  // namespace titan::models
