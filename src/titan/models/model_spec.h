// ModelSpec: how the trainer, the checkpoint code and the CLI see a model family (torchtitan's
// ModelSpec): a builder, the steps the trainer applies after building it (parallelize, then
// post_optimizer_build once the optimizer exists), the state-dict adapter to and from Hugging
// Face checkpoints and the FLOPs counter. The trainer never names a concrete model class.
//
// Specs are registered in one place, builtin_models.cpp; an HF directory picks its spec by the
// model_type of its config.json.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "titan/common/named_tensors.h"
#include "titan/config/trainer_config.h"
#include "titan/models/model.h"
#include "titan/models/parallel_context.h"
#include "titan/models/stage_parts.h"

namespace titan::kernels {
class OverrideResolver;
}

namespace titan::models {

// A checkpoint tensor read only when asked for, so that a load holds one tensor at a time:
// `preview` has its shape and dtype (a view of the mapped file, or a meta tensor for one the
// adapter assembles from several, as a fused expert stack), read() gives its values.
struct LazyTensor {
  at::Tensor preview;
  std::function<at::Tensor()> read;
};
using LazyTensors = std::vector<std::pair<std::string, LazyTensor>>;

// Converts between Hugging Face checkpoint names/layouts and the native ones.
struct StateDictAdapter {
  // Native -> HF on-disk tensors (per-expert MoE names, tied lm_head omitted).
  std::function<NamedTensors(const NamedTensors& native)> to_hf;
  // HF on-disk key -> native: given every HF key and a way to read a tensor (a view of the
  // mapped file, which costs nothing until its values are used), the native tensors, each read
  // when asked for. Accepts per-expert and fused MoE layouts and tied checkpoints without
  // lm_head.weight. Every key and shape is checked before this returns: missing / unexpected /
  // mis-shaped tensors throw titan::Error naming them.
  std::function<LazyTensors(const std::vector<std::string>& hf_keys,
                            const std::function<at::Tensor(const std::string&)>& read,
                            const NamedTensors& expected_native)>
      from_hf;
};

struct BuildOptions {
  at::Device device = at::kCPU;
  at::ScalarType param_dtype = at::kFloat;    // what the optimizer updates
  at::ScalarType compute_dtype = at::kFloat;  // what forward/backward compute in
  bool init_weights = true;                   // false: parameters left uninitialised (to be loaded)
  // Parameters on the meta device, with no storage, which models::materialize() gives them one
  // at a time (so that a model is never held whole in a dtype it will not keep); buffers are
  // made on `device`. Overrides init_weights.
  bool meta_parameters = false;
  uint64_t seed = 0;
  // Which implementation of each overridable op every call site uses (kernels/); nullptr:
  // reference everywhere. The builder resolves each call site once, while building.
  kernels::OverrideResolver* overrides = nullptr;
};

// What post_optimizer_build may attach to training, without knowing the optimizer's class or
// the distributed room.
struct OptimizerHooks {
  // Registers `hook` to run after every optimizer step.
  std::function<void(std::function<void()> hook)> add_step_post_hook;
  // Sums a tensor in place over the ranks that hold the same layers (the "layer_replicas"
  // purpose of parallel_context.h: every rank, or one pipeline stage's); unset when there is
  // only this one.
  std::function<void(at::Tensor& tensor)> all_reduce_sum;
};

struct ModelSpec {
  std::string name;         // model.name
  std::string description;  // one line, for listings and errors
  // Whether the model's own ops are overridable kernels (override.imports); otherwise only the
  // loss's cross_entropy is (the Transformers backend runs Transformers' ops).
  bool overridable_ops = true;
  // The builder loads Hugging Face weights itself (checkpoint.initial_load_in_hf, or a model
  // directory given to titan forward/eval/...): nothing is loaded through the adapter after.
  bool loads_pretrained_in_build = false;
  // config.json model_type values this spec reads (titan forward/eval/... on an HF directory),
  // and the architectures it reads when a config.json has no model_type.
  std::vector<std::string> hf_model_types;
  std::vector<std::string> hf_architectures;

  // Builds a model from the resolved config (model.flavor / model.hf_assets_path ...).
  std::function<std::unique_ptr<Model>(const config::TrainerConfig&, const BuildOptions&)> build;
  // Builds from a Hugging Face config.json (for forward/eval/generate/convert).
  std::function<std::unique_ptr<Model>(const nlohmann::json& hf_config,
                                       const std::string& source_path, const BuildOptions&)>
      build_from_hf_config;
  // Applied by the trainer after building and before the optimizer exists: activation
  // checkpointing, then each parallelism through `parallel` (parallel_context.h), all as
  // wrappers of the model's modules. On one process every degree of `parallel` is 1.
  std::function<void(Model&, const config::TrainerConfig&, ParallelContext& parallel)> parallelize;
  // Called once the optimizer exists (e.g. the MoE expert-bias update after every step).
  std::function<void(Model&, const OptimizerHooks&)> post_optimizer_build;
  StateDictAdapter adapter;
  // Training FLOPs per token, torchtitan's convention (docs/qwen3.md section 7).
  std::function<double(Model&, int64_t seq_len)> flops_per_token;
  // Pipeline parallelism: keeps only `parts` of a built model (its blocks, and the embedding or
  // the head where the stage holds them); the other parts' parameters never get storage (build
  // on the meta device, then this, then materialize). Unset: the model cannot be split.
  std::function<void(Model&, const StageParts& parts)> pipeline;
};

// The registry of model specs (one of the few globals: a registry), filled with the built-in
// families (builtin_models.cpp) on first use.
void register_model_spec(ModelSpec spec);
const ModelSpec& get_model_spec(const std::string& name);  // throws naming the known specs
std::vector<std::string> model_spec_names();
// The spec for a Hugging Face config.json (by its model_type, else by its architectures);
// throws naming the model_type,
// the architectures and what is supported. `source` names the file in messages.
const ModelSpec& spec_for_hf_config(const nlohmann::json& hf_config, const std::string& source);

}  // namespace titan::models
