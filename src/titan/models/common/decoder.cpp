#include "titan/models/common/decoder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/config/validate.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/common/moe.h"

namespace titan::models {
namespace {

// The forward of the whole model: its one stage, whose auxiliary loss is its own share given
// its own selections.
ModelOutput output_of(const StageOutput& out) {
  return {out.hidden, out.auxiliary ? out.auxiliary(out.carried) : at::Tensor()};
}

}  // namespace

MoeBalancing parse_moe_balancing(const std::string& name) {
  config::check_one_of("model.moe_load_balancing", name, {"none", "aux_loss", "expert_bias"});
  if (name == "aux_loss") return MoeBalancing::kAuxLoss;
  if (name == "expert_bias") return MoeBalancing::kExpertBias;
  return MoeBalancing::kNone;
}

// ---- Embedding ----------------------------------------------------------------------------

at::Tensor Embedding::compute(const at::Tensor& ids, at::ScalarType compute_dtype) const {
  // Gather in the parameter dtype, then cast: the same values as casting the whole table.
  if (vocab_real_ < 0) return at::embedding(weight_, ids, pad_).to(compute_dtype);
  const at::Tensor local = ids - vocab_begin_;
  const at::Tensor here = (local >= 0) & (local < vocab_real_);
  const int64_t pad =
      pad_ >= vocab_begin_ && pad_ < vocab_begin_ + vocab_real_ ? pad_ - vocab_begin_ : -1;
  const at::Tensor rows = at::embedding(weight_, at::where(here, local, 0), pad);
  return combine_((rows * here.unsqueeze(-1).to(rows.scalar_type())).to(compute_dtype));
}

void Embedding::set_vocab_parallel(int64_t begin, int64_t real, TensorParallelHooks::Fn combine) {
  vocab_begin_ = begin;
  vocab_real_ = real;
  combine_ = std::move(combine);
}

// The computations read the parameter slots when they run, not when forward() is called: a
// wrapper may put other tensors in the slots first (FSDP's all-gathered parameters).
at::Tensor Embedding::forward(const at::Tensor& ids, at::ScalarType compute_dtype) {
  return run_wrapped({ids}, [this, compute_dtype](const Tensors& in) {
    return Tensors{compute(in[0], compute_dtype)};
  })[0];
}

void Embedding::visit_parameters(const ParameterVisitor& f) {
  f("model.embed_tokens.weight", weight_);
}

// ---- TransformerBlock ---------------------------------------------------------------------

TransformerBlock::TransformerBlock(const DecoderConfig& c, int64_t index,
                                   const at::TensorOptions& options,
                                   const at::TensorOptions& buffer_options,
                                   kernels::OverrideResolver& overrides)
    : Module("layers." + std::to_string(index)),
      prefix_("model.layers." + std::to_string(index) + "."),
      attention_norm_{at::empty({c.hidden_size}, options), c.norm_eps,
                      overrides.function<kernels::Op::kRmsNorm>(path() + ".attention_norm")},
      attention_(c.attention, path(), options, overrides),
      ffn_norm_{at::empty({c.hidden_size}, options), c.norm_eps,
                overrides.function<kernels::Op::kRmsNorm>(path() + ".ffn_norm")} {
  if (c.sparse.at(index)) {
    moe_.emplace(c.moe, path(), options, c.balancing.balancing == MoeBalancing::kExpertBias,
                 buffer_options, overrides);
  } else {
    feed_forward_.emplace(c.hidden_size, c.intermediate_size, path(), options, overrides);
  }
}

std::vector<std::pair<std::string, Linear*>> TransformerBlock::projections() {
  std::vector<std::pair<std::string, Linear*>> out = attention_.projections();
  if (feed_forward_)
    for (auto& p : feed_forward_->projections()) out.push_back(p);
  return out;
}

void TransformerBlock::visit_parameters(const ParameterVisitor& f) {
  attention_.visit_parameters(prefix_ + "self_attn.", f);
  if (moe_) moe_->visit_parameters(prefix_ + "mlp.", f);
  if (feed_forward_) feed_forward_->visit_parameters(prefix_ + "mlp.", f);
  f(prefix_ + "input_layernorm.weight", attention_norm_.weight);
  f(prefix_ + "post_attention_layernorm.weight", ffn_norm_.weight);
}

void TransformerBlock::visit_buffers(const ParameterVisitor& f) {
  if (moe_) moe_->visit_buffers(prefix_ + "mlp.", f);
}

void TransformerBlock::set_tensor_parallel(const TensorParallelHooks& hooks) {
  tp_ = hooks;
  attention_.set_tensor_parallel(hooks);
  if (moe_) moe_->set_tensor_parallel(hooks);
}

TransformerBlock::Output TransformerBlock::forward(const at::Tensor& h, const RopeTables& rope,
                                                   const at::Tensor& positions,
                                                   const at::Tensor& document_ids) {
  const Tensors out = run_wrapped({h}, [this, rope, positions, document_ids](const Tensors& in) {
    return compute(in[0], rope, positions, document_ids, nullptr, nullptr);
  });
  Output result;
  result.hidden = out[0];
  if (sparse()) {
    result.router_logits = out[1];
    result.expert_counts = out[2];
  }
  return result;
}

at::Tensor TransformerBlock::forward_cached(const at::Tensor& h, const RopeTables& rope,
                                            at::Tensor& keys, at::Tensor& values) {
  TITAN_CHECK(!tp_.active(),
              "decoding with a KV cache runs on one process (no tensor or "
              "expert parallelism)");
  at::NoGradGuard no_grad;
  return compute(h, rope, /*positions=*/{}, /*document_ids=*/{}, &keys, &values)[0];
}

Tensors TransformerBlock::compute(const at::Tensor& h, const RopeTables& rope,
                                  const at::Tensor& positions, const at::Tensor& document_ids,
                                  at::Tensor* keys, at::Tensor* values) const {
  const at::Tensor y =
      h + attention_.forward(attention_norm_(h), rope, positions, document_ids, keys, values);
  const at::Tensor x = ffn_norm_(y);
  if (feed_forward_) {
    if (!tp_.active()) return {y + feed_forward_->forward(x)};
    return {y + tp_.exit(feed_forward_->forward(tp_.enter(x)))};
  }
  const MoeOutput routed = moe_->forward(x.reshape({-1, x.size(-1)}));
  return {y + routed.out.view(x.sizes()), routed.router_logits, routed.counts};
}

// ---- FinalNorm ----------------------------------------------------------------------------

at::Tensor FinalNorm::forward(const at::Tensor& h) {
  return run_wrapped({h}, [this](const Tensors& in) { return Tensors{compute(in[0])}; })[0];
}

void FinalNorm::visit_parameters(const ParameterVisitor& f) {
  f("model.norm.weight", norm_.weight);
  if (lm_head_.defined()) f("lm_head.weight", lm_head_);
}

// ---- Decoder ------------------------------------------------------------------------------

Decoder::Decoder(const DecoderConfig& c, const BuildOptions& build)
    : config_(c), compute_dtype_(build.compute_dtype) {
  TITAN_CHECK(static_cast<int64_t>(c.sparse.size()) == c.num_layers,
              "decoder: one sparse flag per layer expected");
  kernels::OverrideResolver reference_only;
  kernels::OverrideResolver& overrides = build.overrides ? *build.overrides : reference_only;
  // A seeded init runs on the CPU in float32 (so it is the same everywhere), then moves; a
  // model to be loaded is allocated where it will live; with meta_parameters the parameters
  // are shapes only until materialize() gives them storage (the buffers are made for real).
  const bool meta = build.meta_parameters;
  const bool init = build.init_weights && !meta;
  const at::TensorOptions params = meta ? at::TensorOptions(at::kMeta).dtype(build.param_dtype)
                                   : init
                                       ? at::TensorOptions(at::kFloat)
                                       : at::TensorOptions(build.device).dtype(build.param_dtype);
  const at::TensorOptions buffers = meta ? at::TensorOptions(build.device) : params;
  auto make = [&](std::vector<int64_t> shape) { return at::empty(shape, params); };
  embedding_ = std::make_unique<Embedding>(make({c.vocab_size, c.hidden_size}), c.pad_token_id);
  for (int64_t i = 0; i < c.num_layers; ++i)
    blocks_.push_back(std::make_unique<TransformerBlock>(c, i, params, buffers, overrides));
  const at::Tensor lm_head =
      c.tie_word_embeddings ? at::Tensor() : make({c.vocab_size, c.hidden_size});
  final_norm_ = std::make_unique<FinalNorm>(make({c.hidden_size}), lm_head, c.norm_eps,
                                            overrides.function<kernels::Op::kRmsNorm>("norm"));
  if (init) initialise(build.seed);
  rope_freqs_ = rope_frequencies(c.rope);
  if (!meta) move_model(*this, build.device, build.param_dtype);
  at::NoGradGuard no_grad;
  for (auto& [name, p] : named_parameters()) p.requires_grad_(true);
}

void Decoder::initialise(uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& [name, t] : named_parameters()) initialise_parameter(name, t, gen);
}

// Hugging Face's _init_weights: normal(0, initializer_range) for every matrix (linears,
// embedding, fused experts, router), zero biases, unit norms, zero padding row.
void Decoder::initialise_parameter(const std::string& name, at::Tensor& t, at::Generator& gen) {
  at::NoGradGuard no_grad;
  if (t.dim() >= 2) {
    t.normal_(0.0, config_.initializer_range, gen);
    if (name == "model.embed_tokens.weight" && config_.pad_token_id)
      t[*config_.pad_token_id].zero_();
  } else if (name.ends_with(".bias")) {
    t.zero_();
  } else {
    t.fill_(1.0);
  }
}

NamedTensors Decoder::initialisation_order() {
  // Every part, held or not: a stage draws the whole model's values and keeps its own.
  NamedTensors out;
  auto add = [&](Module& m) {
    m.visit_parameters([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  };
  add(*embedding_);
  for (auto& b : blocks_) add(*b);
  add(*final_norm_);
  return out;
}

bool Decoder::holds_layer(int64_t index) const {
  const int64_t end = stage_.end_layer < 0 ? config_.num_layers : stage_.end_layer;
  return index >= stage_.first_layer && index < end;
}

void Decoder::keep_only(const StageParts& parts) {
  const int64_t end = parts.end_layer < 0 ? config_.num_layers : parts.end_layer;
  TITAN_CHECK(parts.first_layer >= 0 && parts.first_layer <= end && end <= config_.num_layers,
              "pipeline stage: layers [", parts.first_layer, ", ", end, ") outside the model's ",
              config_.num_layers);
  stage_ = parts;
  stage_.end_layer = end;
}

std::vector<Module*> Decoder::modules() {
  std::vector<Module*> out;
  if (holds_embedding()) out.push_back(embedding_.get());
  for (Module* b : blocks()) out.push_back(b);
  if (stage_.head) out.push_back(final_norm_.get());
  return out;
}

std::vector<Module*> Decoder::blocks() {
  std::vector<Module*> out;
  for (TransformerBlock* b : layers()) out.push_back(b);
  return out;
}

std::vector<TransformerBlock*> Decoder::layers() {
  std::vector<TransformerBlock*> out;
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (holds_layer(static_cast<int64_t>(i))) out.push_back(blocks_[i].get());
  return out;
}

NamedTensors Decoder::named_parameters() {
  NamedTensors out;
  for (Module* m : modules())
    m->visit_parameters([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  return out;
}

NamedTensors Decoder::named_buffers() {
  NamedTensors out;
  for (Module* m : modules())
    m->visit_buffers([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  return out;
}

at::Tensor Decoder::output_weight() {
  const at::Tensor& head = final_norm_->lm_head();
  return head.defined() ? head : embedding_->weight();
}

at::Device Decoder::device() {
  // The device of whatever this model holds (a stage without the embedding has no table).
  for (Module* m : modules()) {
    at::Device found = at::kCPU;
    bool any = false;
    m->visit_parameters([&](const std::string&, at::Tensor& t) {
      if (!any && t.defined()) {
        found = t.device();
        any = true;
      }
    });
    if (any) return found;
  }
  return at::kCPU;
}

const RopeTables& Decoder::rope_for(int64_t length, at::Device device) {
  const auto key =
      std::make_tuple(length, static_cast<int>(device.type()), static_cast<int>(device.index()),
                      static_cast<int>(compute_dtype_));
  auto it = rope_cache_.find(key);
  if (it == rope_cache_.end()) {
    at::NoGradGuard no_grad;
    if (rope_cache_.size() > 8) rope_cache_.clear();  // a few sequence lengths at most
    it = rope_cache_.emplace(key, rope_tables(rope_freqs_, length, compute_dtype_, device)).first;
  }
  return it->second;
}

StageOutput Decoder::forward_stage(const StageInput& input) {
  const at::Tensor& first = stage_.embedding ? input.tokens : input.hidden;
  TITAN_CHECK(first.defined() && first.dim() >= 2, "decoder: the ",
              stage_.embedding ? "token ids [batch, seq]" : "hidden states [batch, seq, hidden]",
              " of this stage are missing");
  const at::Device dev = device();
  const int64_t B = first.size(0);
  const int64_t S = input.sequence_length > 0 ? input.sequence_length : first.size(1);
  const int64_t length = input.positions_end > 0 ? input.positions_end : S;
  // Each row's own positions: rows of the [length, d] tables, the values Hugging Face computes
  // for those position ids.
  const RopeTables& table = rope_for(length, dev);
  RopeTables rope = table;
  at::Tensor positions, documents;
  if (input.positions.defined()) {
    TITAN_CHECK(input.positions.sizes() == at::IntArrayRef({B, S}),
                "decoder: positions must be [batch, seq] = [", B, ", ", S, "], got ",
                input.positions.sizes());
    positions = input.positions.to(dev, at::kLong);
    const at::Tensor flat = positions.flatten();
    rope.cos = table.cos.index_select(0, flat).view({B, 1, S, -1});
    rope.sin = table.sin.index_select(0, flat).view({B, 1, S, -1});
  } else if (length != S) {
    rope = {table.cos.slice(0, 0, S), table.sin.slice(0, 0, S)};
  }
  if (input.document_ids.defined()) {
    TITAN_CHECK(input.document_ids.sizes() == at::IntArrayRef({B, S}),
                "decoder: document ids must be [batch, seq] = [", B, ", ", S, "], got ",
                input.document_ids.sizes());
    documents = input.document_ids.to(dev, at::kLong);
  }
  at::Tensor h = stage_.embedding
                     ? embedding_->forward(input.tokens.to(dev, at::kLong), compute_dtype_)
                     : input.hidden;
  const bool aux_loss = routes();
  // Routing statistics count training forwards only (not evaluation under no_grad).
  const bool count_load = at::GradMode::is_enabled();
  std::vector<at::Tensor> router_logits;
  for (TransformerBlock* block : layers()) {
    TransformerBlock::Output o = block->forward(h, rope, positions, documents);
    h = o.hidden;
    if (!block->sparse()) continue;
    if (aux_loss) router_logits.push_back(o.router_logits);
    at::Tensor& load = block->moe()->tokens_per_expert();
    if (count_load && load.defined()) {
      at::NoGradGuard no_grad;
      load.add_(o.expert_counts);
    }
  }
  StageOutput out;
  out.hidden = stage_.head ? final_norm_->forward(h) : h;
  if (!aux_loss) return out;
  const LoadBalancingSums sums =
      load_balancing_sums(router_logits, config_.moe.num_experts, config_.moe.top_k);
  out.carried = {sums.selected.to(dev)};
  int64_t sparse_layers = 0;
  for (bool sparse : config_.sparse) sparse_layers += sparse ? 1 : 0;
  const auto local_layers = static_cast<double>(router_logits.size());
  out.auxiliary = [this, sums, local_layers,
                   sparse_layers](const std::vector<at::Tensor>& totals) -> at::Tensor {
    if (!sums.probabilities.defined()) return {};  // no sparse layer on this stage
    // Every sparse layer routes the same rows: the whole model's rows are this stage's per
    // layer times the sparse layers of all stages.
    LoadBalancingSums all = sums;
    all.selected = totals.at(0).to(sums.probabilities.device(), at::kFloat);
    all.rows = sums.rows / local_layers * static_cast<double>(sparse_layers);
    return auxiliary_loss(all);
  };
  return out;
}

bool Decoder::routes() const {
  return config_.balancing.balancing == MoeBalancing::kAuxLoss && config_.moe.num_experts > 0;
}

std::vector<std::vector<int64_t>> Decoder::carried_shapes() const {
  if (!routes()) return {};
  return {{config_.moe.num_experts}};
}

at::Tensor Decoder::auxiliary_loss(const LoadBalancingSums& sums) const {
  const at::Tensor loss = load_balancing_loss(sums, config_.moe.num_experts);
  if (!loss.defined()) return {};
  return config_.balancing.router_aux_loss_coef / aux_loss_divisor_ * loss;
}

ModelShape Decoder::shape() const {
  ModelShape s;
  s.layers = config_.num_layers;
  for (int64_t i = 0; i < config_.num_layers; ++i) s.layers_held += holds_layer(i) ? 1 : 0;
  s.hidden_size = config_.hidden_size;
  s.tied_embeddings = config_.tie_word_embeddings;
  s.embedding_name = "model.embed_tokens.weight";
  s.heads = config_.attention.num_heads;
  s.kv_heads = config_.attention.num_kv_heads;
  s.head_dim = config_.attention.head_dim;
  s.intermediate_size = config_.moe.num_experts > 0
                            ? config_.moe.intermediate_size * config_.moe.top_k
                            : config_.intermediate_size;
  return s;
}

ModelOutput Decoder::forward(const at::Tensor& input_ids) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  StageInput in;
  in.tokens = input_ids;
  return output_of(forward_stage(in));
}

ModelOutput Decoder::forward_packed(const at::Tensor& input_ids, const PackedDocuments& documents) {
  if (!documents.document_ids.defined() && !documents.positions.defined())
    return forward(input_ids);
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  TITAN_CHECK(documents.positions.defined() && documents.positions.sizes() == input_ids.sizes() &&
                  (!documents.document_ids.defined() ||
                   documents.document_ids.sizes() == input_ids.sizes()),
              "positions (and document ids) must be shaped like the input ids ", input_ids.sizes(),
              ", got ", documents.positions.sizes(), " and ", documents.document_ids.sizes());
  StageInput in;
  in.tokens = input_ids;
  in.positions = documents.positions;
  in.positions_end = documents.positions_end;
  in.document_ids = documents.document_ids;
  return output_of(forward_stage(in));
}

at::Tensor Decoder::forward_cached(const at::Tensor& input_ids, KVCache& cache) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  TITAN_CHECK(stage_.embedding && stage_.head && layers().size() == blocks_.size(),
              "decoding with a KV cache needs the whole model, not a pipeline stage");
  at::NoGradGuard no_grad;
  const at::Device dev = device();
  const at::Tensor ids = input_ids.to(dev, at::kLong);
  const int64_t past = cache.length;
  RopeTables rope = rope_for(past + ids.size(1), dev);
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

// ---- LoRA host ----------------------------------------------------------------------------

TransformerBlock* Decoder::block_of(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (!name.starts_with(prefix)) return nullptr;
  const size_t end = name.find('.', prefix.size());
  if (end == std::string::npos) return nullptr;
  const std::string index = name.substr(prefix.size(), end - prefix.size());
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return nullptr;
  const size_t i = std::stoul(index);
  return i < blocks_.size() ? blocks_[i].get() : nullptr;
}

Linear* Decoder::projection_named(const std::string& weight_name) {
  TransformerBlock* block = block_of(weight_name);
  if (block == nullptr) return nullptr;
  for (auto& [name, linear] : block->projections())
    if (block->prefix() + name + ".weight" == weight_name) return linear;
  return nullptr;
}

std::vector<LoraHost::Weight> Decoder::adaptable_weights() {
  std::vector<Weight> out;
  for (TransformerBlock* block : layers()) {
    for (const auto& [name, linear] : block->projections())
      out.push_back({block->prefix() + name + ".weight", block->prefix() + name, false});
    if (block->sparse())
      for (const char* stack : {MoeLayer::kGateUp, MoeLayer::kDown})
        out.push_back({block->prefix() + stack, block->prefix() + stack, true});
  }
  return out;
}

void Decoder::add_adapters(const std::vector<std::string>& weight_names, const LoraOptions& options,
                           const at::TensorOptions& tensor_options) {
  const at::TensorOptions frozen = tensor_options.requires_grad(false);
  for (const std::string& name : weight_names) {
    TransformerBlock* block = block_of(name);
    TITAN_CHECK(block != nullptr, name, " is not a weight LoRA can adapt");
    if (Linear* linear = projection_named(name)) {
      TITAN_CHECK(!linear->adapter, name, " already has a LoRA adapter");
      linear->add_adapter(options, frozen);
      continue;
    }
    const std::string stack = name.substr(block->prefix().size());
    TITAN_CHECK(block->sparse() && (stack == MoeLayer::kGateUp || stack == MoeLayer::kDown), name,
                " is not a weight LoRA can adapt");
    block->moe()->add_adapter(stack, options, frozen);
  }
}

int64_t Decoder::quantize_frozen_linears(bool double_quantization) {
  int64_t bytes = 0;
  for (TransformerBlock* block : layers()) {
    for (auto& [name, linear] : block->projections()) {
      if (linear->nf4) {
        bytes += linear->nf4->bytes();
      } else if (!linear->weight.requires_grad()) {
        bytes += linear->quantize(double_quantization);
      }
    }
  }
  return bytes;
}

bool Decoder::quantizable(const std::string& name) { return projection_named(name) != nullptr; }

int64_t Decoder::quantize_weight(const std::string& name, bool double_quantization) {
  Linear* linear = projection_named(name);
  TITAN_CHECK(linear != nullptr, name, " is not a projection weight QLoRA can hold in NF4");
  return linear->quantize(double_quantization);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Decoder::nf4_weights() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (TransformerBlock* block : layers())
    for (const auto& [name, linear] : block->projections())
      if (linear->nf4)
        out.push_back(
            {block->prefix() + name + ".weight", {linear->out_features(), linear->in_features()}});
  return out;
}

at::Tensor Decoder::dequantized_weight(const std::string& name) {
  Linear* linear = projection_named(name);
  TITAN_CHECK(linear != nullptr && linear->nf4, name, " is not held in NF4");
  return dequantize_base(*linear->nf4, at::kFloat);
}

Decoder& as_decoder(Model& model) {
  auto* decoder = dynamic_cast<Decoder*>(&model);
  TITAN_CHECK(decoder != nullptr, "a native decoder model is needed here, not another backend's");
  return *decoder;
}

}  // namespace titan::models
