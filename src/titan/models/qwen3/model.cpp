#include "titan/models/qwen3/model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/config/validate.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/common/moe.h"

namespace titan::models {
namespace {

RopeSettings rope_settings(const Qwen3Args& a) {
  RopeSettings s;
  s.head_dim = a.head_dim;
  s.theta = a.rope_theta;
  s.yarn = a.rope_type == "yarn";
  s.factor = a.rope_factor;
  s.original_max_position_embeddings = a.rope_original_max_position_embeddings > 0
                                           ? a.rope_original_max_position_embeddings
                                           : a.max_position_embeddings;
  s.attention_factor = a.rope_attention_factor;
  s.beta_fast = a.rope_beta_fast;
  s.beta_slow = a.rope_beta_slow;
  s.truncate = a.rope_truncate;
  return s;
}

}  // namespace

MoeBalancing parse_moe_balancing(const std::string& name) {
  config::check_one_of("model.moe_load_balancing", name, {"none", "aux_loss", "expert_bias"});
  if (name == "aux_loss") return MoeBalancing::kAuxLoss;
  if (name == "expert_bias") return MoeBalancing::kExpertBias;
  return MoeBalancing::kNone;
}

at::Tensor Qwen3Embedding::compute(const at::Tensor& ids, at::ScalarType compute_dtype) const {
  // Gather in the parameter dtype, then cast: the same values as casting the whole table.
  if (vocab_real_ < 0) return at::embedding(weight_, ids, pad_).to(compute_dtype);
  const at::Tensor local = ids - vocab_begin_;
  const at::Tensor here = (local >= 0) & (local < vocab_real_);
  const int64_t pad =
      pad_ >= vocab_begin_ && pad_ < vocab_begin_ + vocab_real_ ? pad_ - vocab_begin_ : -1;
  const at::Tensor rows = at::embedding(weight_, at::where(here, local, 0), pad);
  return combine_((rows * here.unsqueeze(-1).to(rows.scalar_type())).to(compute_dtype));
}

void Qwen3Embedding::set_vocab_parallel(int64_t begin, int64_t real,
                                        TensorParallelHooks::Fn combine) {
  vocab_begin_ = begin;
  vocab_real_ = real;
  combine_ = std::move(combine);
}

// The computations read the parameter slots when they run, not when forward() is called: a
// wrapper may put other tensors in the slots first (FSDP's all-gathered parameters).
at::Tensor Qwen3Embedding::forward(const at::Tensor& ids, at::ScalarType compute_dtype) {
  return run_wrapped({ids}, [this, compute_dtype](const Tensors& in) {
    return Tensors{compute(in[0], compute_dtype)};
  })[0];
}

void Qwen3Embedding::visit_parameters(const ParameterVisitor& f) {
  f("model.embed_tokens.weight", weight_);
}

at::Tensor Qwen3FinalNorm::forward(const at::Tensor& h) {
  return run_wrapped({h}, [this](const Tensors& in) { return Tensors{compute(in[0])}; })[0];
}

void Qwen3FinalNorm::visit_parameters(const ParameterVisitor& f) {
  f("model.norm.weight", norm_);
  if (lm_head_.defined()) f("lm_head.weight", lm_head_);
}

Qwen3Model::Qwen3Model(const Qwen3Args& args, const Qwen3Options& options,
                       const BuildOptions& build)
    : args_(args), options_(options), compute_dtype_(build.compute_dtype) {
  args_.validate("Qwen3 model");
  const Qwen3Args& a = args_;
  kernels::OverrideResolver reference_only;
  kernels::OverrideResolver& overrides = build.overrides ? *build.overrides : reference_only;
  // A seeded init runs on the CPU in float32 (so it is the same everywhere), then moves; a
  // model to be loaded is allocated where it will live; with meta_parameters the parameters
  // are shapes only until materialize() gives them storage (the buffers are made for real).
  const bool meta = build.meta_parameters;
  const bool init = build.init_weights && !meta;
  const at::TensorOptions options_for_params =
      meta   ? at::TensorOptions(at::kMeta).dtype(build.param_dtype)
      : init ? at::TensorOptions(at::kFloat)
             : at::TensorOptions(build.device).dtype(build.param_dtype);
  const at::TensorOptions options_for_buffers =
      meta ? at::TensorOptions(build.device) : options_for_params;
  auto make = [&](std::vector<int64_t> shape) { return at::empty(shape, options_for_params); };
  embedding_ =
      std::make_unique<Qwen3Embedding>(make({a.vocab_size, a.hidden_size}), a.pad_token_id);
  const bool expert_bias = options_.balancing == MoeBalancing::kExpertBias;
  for (int64_t i = 0; i < a.num_hidden_layers; ++i) {
    blocks_.push_back(std::make_unique<Qwen3Block>(a, i, expert_bias, options_for_params,
                                                   options_for_buffers, overrides));
  }
  const at::Tensor lm_head =
      a.tie_word_embeddings ? at::Tensor() : make({a.vocab_size, a.hidden_size});
  final_norm_ = std::make_unique<Qwen3FinalNorm>(make({a.hidden_size}), lm_head, a.rms_norm_eps,
                                                 overrides.function<kernels::Op::kRmsNorm>("norm"));
  if (init) initialise(build.seed);
  rope_freqs_ = rope_frequencies(rope_settings(a));
  if (!meta) move_model(*this, build.device, build.param_dtype);
  at::NoGradGuard no_grad;
  for (auto& [name, p] : named_parameters()) p.requires_grad_(true);
}

void Qwen3Model::initialise(uint64_t seed) {
  // Hugging Face's _init_weights: normal(0, initializer_range) for every matrix (linears,
  // embedding, fused experts, router), zero biases, unit norms, zero padding row.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& [name, t] : named_parameters()) initialise_parameter(name, t, gen);
}

void Qwen3Model::initialise_parameter(const std::string& name, at::Tensor& t, at::Generator& gen) {
  at::NoGradGuard no_grad;
  if (t.dim() >= 2) {
    t.normal_(0.0, args_.initializer_range, gen);
    if (name == "model.embed_tokens.weight" && args_.pad_token_id) t[*args_.pad_token_id].zero_();
  } else if (name.ends_with(".bias")) {
    t.zero_();
  } else {
    t.fill_(1.0);
  }
}

std::vector<Module*> Qwen3Model::modules() {
  std::vector<Module*> out{embedding_.get()};
  for (auto& b : blocks_) out.push_back(b.get());
  out.push_back(final_norm_.get());
  return out;
}

std::vector<Module*> Qwen3Model::blocks() {
  std::vector<Module*> out;
  for (auto& b : blocks_) out.push_back(b.get());
  return out;
}

std::vector<Qwen3Block*> Qwen3Model::qwen3_blocks() {
  std::vector<Qwen3Block*> out;
  for (auto& b : blocks_) out.push_back(b.get());
  return out;
}

NamedTensors Qwen3Model::named_parameters() {
  NamedTensors out;
  for (Module* m : modules()) {
    m->visit_parameters([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  }
  return out;
}

NamedTensors Qwen3Model::named_buffers() {
  NamedTensors out;
  for (Module* m : modules()) {
    m->visit_buffers([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  }
  return out;
}

nlohmann::json Qwen3Model::hf_config(const std::string& dtype) const {
  return qwen3_args_to_hf_config(args_, dtype);
}

at::Tensor Qwen3Model::output_weight() {
  const at::Tensor& head = final_norm_->lm_head();
  return head.defined() ? head : embedding_->weight();
}

const RopeTables& Qwen3Model::rope_for(int64_t seq_len, at::Device device) {
  const auto key =
      std::make_tuple(seq_len, static_cast<int>(device.type()), static_cast<int>(device.index()),
                      static_cast<int>(compute_dtype_));
  auto it = rope_cache_.find(key);
  if (it == rope_cache_.end()) {
    at::NoGradGuard no_grad;
    if (rope_cache_.size() > 8) rope_cache_.clear();  // a few sequence lengths at most
    it = rope_cache_.emplace(key, rope_tables(rope_freqs_, seq_len, compute_dtype_, device)).first;
  }
  return it->second;
}

ModelOutput Qwen3Model::forward(const at::Tensor& input_ids) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  const at::Device device = embedding_->weight().device();
  const at::Tensor ids = input_ids.to(device, at::kLong);
  return run(ids, rope_for(ids.size(1), device), /*document_ids=*/{});
}

ModelOutput Qwen3Model::forward_packed(const at::Tensor& input_ids,
                                       const PackedDocuments& documents) {
  if (!documents.document_ids.defined()) return forward(input_ids);
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  TITAN_CHECK(documents.positions.sizes() == input_ids.sizes() &&
                  documents.document_ids.sizes() == input_ids.sizes(),
              "positions and document ids must be shaped like the input ids ", input_ids.sizes(),
              ", got ", documents.positions.sizes(), " and ", documents.document_ids.sizes());
  const at::Device device = embedding_->weight().device();
  const at::Tensor ids = input_ids.to(device, at::kLong);
  const int64_t B = ids.size(0), S = ids.size(1);
  // Each row's own positions: rows of the [S, d] tables (positions never exceed S - 1), the
  // values Hugging Face computes for those position ids.
  const RopeTables& table = rope_for(S, device);
  const at::Tensor positions = documents.positions.to(device, at::kLong).flatten();
  RopeTables rope;
  rope.cos = table.cos.index_select(0, positions).view({B, 1, S, -1});
  rope.sin = table.sin.index_select(0, positions).view({B, 1, S, -1});
  return run(ids, rope, documents.document_ids.to(device, at::kLong));
}

ModelOutput Qwen3Model::run(const at::Tensor& ids, const RopeTables& rope,
                            const at::Tensor& document_ids) {
  at::Tensor h = embedding_->forward(ids, compute_dtype_);
  const bool aux_loss = options_.balancing == MoeBalancing::kAuxLoss;
  // Routing statistics count training forwards only (not evaluation under no_grad).
  const bool count_load = at::GradMode::is_enabled();
  std::vector<at::Tensor> router_logits;
  for (auto& block : blocks_) {
    Qwen3BlockOutput out = block->forward(h, rope, document_ids);
    h = out.hidden;
    if (!block->sparse()) continue;
    if (aux_loss) router_logits.push_back(out.router_logits);
    if (count_load && block->tokens_per_expert().defined()) {
      at::NoGradGuard no_grad;
      block->tokens_per_expert().add_(out.expert_counts);
    }
  }
  ModelOutput result;
  result.hidden = final_norm_->forward(h);
  if (!router_logits.empty()) {
    result.extra_loss =
        options_.router_aux_loss_coef *
        load_balancing_loss(router_logits, args_.num_experts, args_.num_experts_per_tok);
  }
  return result;
}

std::vector<LoraHost::Weight> Qwen3Model::adaptable_weights() {
  std::vector<Weight> out;
  for (auto& block : blocks_)
    for (const auto& w : block->adaptable_weights()) out.push_back({w.name, w.module, w.experts});
  return out;
}

Qwen3Block* Qwen3Model::block_of(const std::string& name) {
  // "model.layers.N." names the block.
  const std::string prefix = "model.layers.";
  if (!name.starts_with(prefix)) return nullptr;
  const size_t end = name.find('.', prefix.size());
  if (end == std::string::npos) return nullptr;
  const std::string index = name.substr(prefix.size(), end - prefix.size());
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return nullptr;
  const size_t i = std::stoul(index);
  return i < blocks_.size() ? blocks_[i].get() : nullptr;
}

void Qwen3Model::add_adapters(const std::vector<std::string>& weight_names,
                              const LoraOptions& options, const at::TensorOptions& tensor_options) {
  for (const std::string& name : weight_names) {
    Qwen3Block* block = block_of(name);
    TITAN_CHECK(block != nullptr, name, " is not a weight LoRA can adapt");
    block->add_adapter(name, options, tensor_options.requires_grad(false));
  }
}

int64_t Qwen3Model::quantize_frozen_linears(bool double_quantization) {
  int64_t bytes = 0;
  for (auto& block : blocks_) bytes += block->quantize_frozen_projections(double_quantization);
  return bytes;
}

bool Qwen3Model::quantizable(const std::string& name) {
  Qwen3Block* block = block_of(name);
  return block != nullptr && block->projection_weighted(name) != nullptr;
}

int64_t Qwen3Model::quantize_weight(const std::string& name, bool double_quantization) {
  Qwen3Block* block = block_of(name);
  Linear* linear = block != nullptr ? block->projection_weighted(name) : nullptr;
  TITAN_CHECK(linear != nullptr && linear->weight.defined() && !linear->weight.is_meta(), name,
              " is not a materialized projection weight QLoRA can hold in NF4");
  TITAN_CHECK(!linear->weight.requires_grad(), name, " is trained, so it cannot be held in NF4");
  at::NoGradGuard no_grad;
  linear->nf4 = quantize_base(linear->weight, double_quantization);
  linear->weight = at::Tensor();
  return linear->nf4->bytes();
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Qwen3Model::nf4_weights() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (auto& block : blocks_)
    for (auto& w : block->nf4_weights()) out.push_back(std::move(w));
  return out;
}

at::Tensor Qwen3Model::dequantized_weight(const std::string& name) {
  Qwen3Block* block = block_of(name);
  Linear* linear = block != nullptr ? block->projection_weighted(name) : nullptr;
  TITAN_CHECK(linear != nullptr && linear->nf4, name, " is not held in NF4");
  return dequantize_base(*linear->nf4, at::kFloat);
}

at::Tensor Qwen3Model::forward_cached(const at::Tensor& input_ids, KVCache& cache) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  at::NoGradGuard no_grad;
  const at::Device device = embedding_->weight().device();
  const at::Tensor ids = input_ids.to(device, at::kLong);
  const int64_t past = cache.length;
  RopeTables rope = rope_for(past + ids.size(1), device);
  if (past > 0) rope = {rope.cos.slice(0, past), rope.sin.slice(0, past)};
  cache.keys.resize(blocks_.size());
  cache.values.resize(blocks_.size());
  at::Tensor h = embedding_->compute(ids, compute_dtype_);
  for (size_t i = 0; i < blocks_.size(); ++i)
    h = blocks_[i]->forward_cached(h, rope, cache.keys[i], cache.values[i]);
  cache.length += ids.size(1);
  h = final_norm_->compute(h);
  return at::linear(h, output_weight().to(compute_dtype_));
}

}  // namespace titan::models
