// How parallelism applies to a decoder (torchtitan's per-model sharding plan and
// apply_fsdp_to_decoder): a family gives a table of its parameters' roles, and one generic
// step applies tensor parallelism, expert parallelism, activation checkpointing and the FSDP
// units from it, in torchtitan's order. The FLOPs count and the expert-bias hook are the
// decoder's too, written once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/models/common/decoder.h"
#include "titan/models/model_spec.h"
#include "titan/models/parallel_context.h"

namespace titan::models {

// What tensor and expert parallelism do with a parameter.
enum class ParameterRole {
  kReplicated,       // whole everywhere; its gradient is complete
  kColumn,           // split on dim 0 over tp (its outputs: heads, MLP columns)
  kRow,              // split on dim 1 over tp (its inputs); the outputs are partial sums
  kPartialOverTp,    // whole, but its gradient is a partial sum over tp (it sees split data)
  kSequencePartial,  // whole; its gradient is a partial sum over tp under sequence parallelism
  kExpert,           // an expert stack: split on dim 0 (the experts) over ep
  kVocabulary,       // the embedding or head: split on dim 0 (the vocabulary) over tp
};

// A family's table: the role of each parameter by the end of its name; the first matching rule
// wins, anything unmatched is replicated. A LoRA adapter follows its base: for a column base B
// is split as the base and A's gradient is partial; for a row base A is split on dim 1 and B's
// gradient is partial; an expert stack's adapters are split over ep with it.
struct DecoderPlan {
  struct Rule {
    std::string suffix;
    ParameterRole role;
  };
  std::vector<Rule> rules;
  ParameterRole role_of(const std::string& name) const;
};

// The roles of the shared blocks' parameters (common/decoder.h names): q/k/v column and o_proj
// row, gate/up column and down row, q/k norms and the router partial, the layer norms and the
// final norm partial under sequence parallelism, expert stacks, embedding and head.
DecoderPlan standard_decoder_plan();

// The rules tensor and expert parallelism put on a decoder's dimensions (the heads, the MLP's
// width and, with sequence parallelism, seq_len divided by tp; the experts by ep), checked by
// parallelize_decoder and by `titan configs --print`'s layout check before any launch.
void check_decoder_degrees(const DecoderConfig& c, const config::TrainerConfig& config, int64_t tp,
                           int64_t ep);

// Tensor parallelism (with the vocabulary-parallel embedding, head and loss), expert
// parallelism, activation checkpointing, then the FSDP units: the generic parallelize step of
// every native family. Throws naming the degree that does not divide the model.
void parallelize_decoder(Decoder& model, const DecoderPlan& plan,
                         const config::TrainerConfig& config, ParallelContext& parallel);

// The data-parallel units torchtitan makes of a decoder, in forward order: the embedding (when
// it is a unit of its own), each block, and the head unit (the final norm with the output
// projection, which a tied embedding joins), which is not resharded after forward since the
// loss reads the head right after it. `reshard_policy` is
// parallelism.fsdp_reshard_after_forward; `expert` tells expert weights (FSDP over efsdp).
struct DecoderUnits {
  Module* embedding = nullptr;  // null: none, or in the head unit (tied)
  std::vector<Module*> blocks;
  std::vector<Module*> head;
};
void shard_decoder_units(ParallelContext& parallel, const DecoderUnits& units,
                         const std::string& reshard_policy,
                         std::function<bool(const std::string& name)> expert = nullptr);

// Training FLOPs per token, torchtitan's convention (docs/qwen3.md section 7), from the
// parameter shapes: 6 * N_active + 12 * layers * heads * head_dim * seq_len. N_active excludes
// the input embedding `embedding_name` unless the model is tied (then it counts once, as the
// head) and weights routed-expert parameters (`expert`) by `routed_fraction` (k / E).
double decoder_flops_per_token(const NamedTensors& parameters, const std::string& embedding_name,
                               bool tied, const std::function<bool(const std::string&)>& expert,
                               double routed_fraction, int64_t layers, int64_t heads,
                               int64_t head_dim, int64_t seq_len);
// The same for a Decoder (every layer of the model, held or not).
double decoder_flops_per_token(Decoder& model, int64_t seq_len);

// With expert-bias balancing: after every optimizer step, sums each MoE layer's token counts
// over the ranks that hold the same layers (OptimizerHooks::all_reduce_sum), updates its
// expert bias and zeroes the counts (torchtitan's post_optimizer_build_fn). Nothing otherwise.
void decoder_post_optimizer_build(Model& model, const OptimizerHooks& hooks);

// Whether a native parameter name is an expert stack's (or its adapter's).
bool is_expert_parameter(const std::string& name);

}  // namespace titan::models
