// Incremental decoding (titan generate): an optional interface a model offers through
// Model::incremental_decoder(), so that the training interface does not carry a KV cache.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace titan::models {

// Keys and values of the tokens decoded so far, per layer.
struct KVCache {
  std::vector<at::Tensor> keys, values;  // [B, n_kv_heads, length, head_dim] per layer
  int64_t length = 0;                    // tokens already in the cache
};

class IncrementalDecoder {
 public:
  virtual ~IncrementalDecoder() = default;
  // Logits [B, n, V] of `input_ids` [B, n] placed after the cache's tokens; appends their keys
  // and values to the cache. Inference only (no autograd).
  virtual at::Tensor forward_cached(const at::Tensor& input_ids, KVCache& cache) = 0;
};

}  // namespace titan::models
