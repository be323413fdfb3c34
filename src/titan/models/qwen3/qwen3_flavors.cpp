// The named Qwen3 flavors: the published sizes (Qwen/Qwen3-*) and two debug models with the
// real vocabulary.
#include <map>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::models {
namespace {

Qwen3Args official(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                   int64_t kv_heads, bool tie) {
  Qwen3Args a;
  a.model_type = "qwen3";
  a.vocab_size = 151936;
  a.hidden_size = hidden;
  a.intermediate_size = intermediate;
  a.num_hidden_layers = layers;
  a.num_attention_heads = heads;
  a.num_key_value_heads = kv_heads;
  a.head_dim = 128;
  a.rms_norm_eps = 1e-6;
  a.rope_theta = 1000000.0;
  a.max_position_embeddings = 40960;
  a.tie_word_embeddings = tie;
  a.bos_token_id = 151643;
  a.eos_token_id = {151645};
  a.dtype = "bfloat16";
  return a;
}

Qwen3Args official_moe(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                       int64_t kv_heads, int64_t moe_intermediate) {
  Qwen3Args a = official(hidden, intermediate, layers, heads, kv_heads, false);
  a.model_type = "qwen3_moe";
  a.num_experts = 128;
  a.num_experts_per_tok = 8;
  a.moe_intermediate_size = moe_intermediate;
  a.norm_topk_prob = true;
  return a;
}

const std::map<std::string, Qwen3Args>& flavors() {
  static const std::map<std::string, Qwen3Args> table = [] {
    std::map<std::string, Qwen3Args> t;
    // Tiny but with the real vocabulary, so it trains on real tokenizer output in seconds.
    Qwen3Args debug = official(256, 768, 4, 8, 4, true);
    debug.head_dim = 64;
    t["debugmodel"] = debug;
    Qwen3Args debug_moe = debug;
    debug_moe.model_type = "qwen3_moe";
    debug_moe.num_experts = 8;
    debug_moe.num_experts_per_tok = 2;
    debug_moe.moe_intermediate_size = 256;
    debug_moe.norm_topk_prob = true;
    t["debugmodel_moe"] = debug_moe;
    t["0.6B"] = official(1024, 3072, 28, 16, 8, true);
    t["1.7B"] = official(2048, 6144, 28, 16, 8, true);
    t["4B"] = official(2560, 9728, 36, 32, 8, true);
    t["8B"] = official(4096, 12288, 36, 32, 8, false);
    t["14B"] = official(5120, 17408, 40, 40, 8, false);
    t["32B"] = official(5120, 25600, 64, 64, 8, false);
    t["30B-A3B"] = official_moe(2048, 6144, 48, 32, 4, 768);
    t["235B-A22B"] = official_moe(4096, 12288, 94, 64, 4, 1536);
    return t;
  }();
  return table;
}

}  // namespace

Qwen3Args qwen3_flavor(const std::string& name) {
  const auto& table = flavors();
  auto it = table.find(name);
  if (it == table.end()) {
    fail("unknown Qwen3 flavor '", name, "' (known: ", join(qwen3_flavor_names()), ", or auto)");
  }
  return it->second;
}

std::vector<std::string> qwen3_flavor_names() {
  // Listed from small to large, as a user reads them.
  return {"debugmodel", "debugmodel_moe", "0.6B",     "1.7B", "4B", "8B", "14B",
          "32B",        "30B-A3B",        "235B-A22B"};
}

}  // namespace titan::models
