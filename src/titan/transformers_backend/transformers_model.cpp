#include "titan/transformers_backend/transformers_model.h"

#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <map>

#include "titan/common/error.h"
#include "titan/kernels/registry.h"
#include "titan/transformers_backend/python_modules.h"
#include "titan/transformers_backend/python_runtime.h"

namespace py = pybind11;

namespace titan::transformers_backend {

PyRef hold(py::object object) {
  return PyRef(new py::object(std::move(object)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

HfUnit::HfUnit(std::string path, TransformersModel& owner, std::vector<size_t> slots)
    : Module(std::move(path)), owner_(owner), slots_(std::move(slots)) {}

models::Tensors HfUnit::forward(const models::Tensors& inputs,
                                std::function<py::object(const models::Tensors&)> call) {
  // A tuple result (older layers return one) contributes its first element, the hidden state.
  return run_wrapped(inputs, [this, call](const models::Tensors& in) {
    py::gil_scoped_acquire gil;
    owner_.push(slots_);
    py::object r;
    try {
      r = call(in);
    } catch (const py::error_already_set& e) {
      fail("the Transformers model failed in ", path(), ": ", describe(e));
    }
    if (py::isinstance<py::tuple>(r))
      return models::Tensors{r.cast<py::tuple>()[0].cast<at::Tensor>()};
    return models::Tensors{r.cast<at::Tensor>()};
  });
}

void HfUnit::visit_parameters(const models::ParameterVisitor& visit) {
  owner_.visit_slots(slots_, visit);
}

TransformersModel::TransformersModel(py::object model, py::object helper,
                                     at::ScalarType compute_dtype)
    : compute_dtype_(compute_dtype) {
  model_ = hold(model);
  helper_ = hold(helper);
  py::tuple plan;
  try {
    plan = helper.attr("plan")(model).cast<py::tuple>();
  } catch (const py::error_already_set& e) {
    fail("cannot train this Transformers model: ", describe(e));
  }
  const auto names = plan[0].cast<std::vector<std::string>>();
  const py::list tensors = plan[1];
  sites_ = hold(plan[2]);
  const auto units = plan[3].cast<std::vector<int64_t>>();
  output_slot_ = plan[4].cast<size_t>();
  const int64_t input_slot = plan[5].cast<int64_t>();
  flops_numbers_ = plan[6].cast<std::vector<int64_t>>();
  router_logits_ = plan[7].cast<bool>();
  tied_ = input_slot >= 0 && static_cast<size_t>(input_slot) == output_slot_;
  if (input_slot >= 0) input_embedding_name_ = names[input_slot];
  py::tuple parts = helper.attr("structure")(model).cast<py::tuple>();
  decoder_ = hold(parts[0]);
  const py::list layers = parts[1];
  config_json_ = hold(helper.attr("config_json")(model.attr("config")));
  if (py::hasattr(model, "_titan_weights_dir"))
    weights_dir_ = model.attr("_titan_weights_dir").cast<std::string>();

  for (size_t i = 0; i < names.size(); ++i) {
    // titan's leaf: the same storage as the Transformers parameter it replaces.
    at::Tensor t = tensors[i].cast<at::Tensor>().detach();
    t.requires_grad_(true);
    slots_.push_back({names[i], t, at::Tensor()});
  }
  std::vector<size_t> root, embedding;
  std::vector<std::vector<size_t>> per_layer(py::len(layers));
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i] >= 0) {
      per_layer[units[i]].push_back(i);
    } else if (units[i] == -1) {
      embedding.push_back(i);
    } else {
      root.push_back(i);
    }
  }
  root_ = std::make_unique<HfUnit>("root", *this, root);
  if (!embedding.empty()) {
    embedding_ = std::make_unique<HfUnit>("tok_embeddings", *this, embedding);
    patch(*embedding_, parts[2]);
  }
  for (size_t n = 0; n < per_layer.size(); ++n) {
    layers_.push_back(std::make_unique<HfUnit>("layers." + std::to_string(n), *this, per_layer[n]));
    patch(*layers_.back(), layers[n]);
  }
  // Until the first forward, the Python modules hold titan's tensors (they are the same).
  push(root);
}

TransformersModel::~TransformersModel() { slots_.clear(); }

void TransformersModel::visit_slots(const std::vector<size_t>& which,
                                    const models::ParameterVisitor& visit) {
  for (size_t i : which)
    if (slots_[i].tensor.defined()) visit(slots_[i].name, slots_[i].tensor);  // not NF4 ones
}

void TransformersModel::push(const std::vector<size_t>& which) {
  py::list sites, tensors;
  const py::list all_sites = *sites_;
  for (size_t i : which) {
    const at::Tensor& t = slots_[i].tensor;
    if (!t.defined()) continue;  // held in NF4, read by the module's patched forward
    sites.append(all_sites[i]);
    // Weights are cast to the compute dtype where they are used (gradients reach the masters).
    tensors.append(t.is_floating_point() && t.scalar_type() != compute_dtype_ ? t.to(compute_dtype_)
                                                                              : t);
  }
  helper_->attr("push")(sites, tensors);
}

void TransformersModel::patch(HfUnit& unit, py::object module) {
  HfUnit* target = &unit;
  py::cpp_function make([target](py::object original) {
    PyRef forward = hold(original);
    return py::cpp_function([target, forward](py::args args, py::kwargs kwargs) -> py::object {
      TITAN_CHECK(py::len(args) >= 1, "the Transformers model called ", target->path(),
                  " without its input as the first argument");
      const at::Tensor x = args[0].cast<at::Tensor>();
      PyRef rest = hold(args[py::slice(1, py::len(args), 1)]);
      PyRef keywords = hold(kwargs);
      models::Tensors out;
      {
        // The wrappers (collectives, recomputation) run without the GIL.
        py::gil_scoped_release release;
        out = target->forward({x}, [forward, rest, keywords](const models::Tensors& in) {
          return (*forward)(in[0], *py::reinterpret_borrow<py::tuple>(*rest),
                            **py::reinterpret_borrow<py::dict>(*keywords));
        });
      }
      return py::cast(out[0]);
    });
  });
  helper_->attr("patch_forward")(module, make);
}

models::ModelOutput TransformersModel::forward(const at::Tensor& input_ids) {
  return run(input_ids, models::PackedDocuments());
}

models::ModelOutput TransformersModel::forward_packed(const at::Tensor& input_ids,
                                                      const models::PackedDocuments& documents) {
  return run(input_ids, documents);
}

models::ModelOutput TransformersModel::run(const at::Tensor& input_ids,
                                           const models::PackedDocuments& documents) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  TITAN_CHECK(!stage_, "a pipeline stage of the Transformers model runs through forward_stage");
  const at::Device dev = device();
  const at::Tensor ids = input_ids.to(dev, at::kLong);
  models::Tensors inputs = {ids};
  if (documents.positions.defined()) inputs.push_back(documents.positions.to(dev, at::kLong));
  const at::Tensor document_ids = pass_document_ids_ && documents.document_ids.defined()
                                      ? documents.document_ids.to(dev, at::kLong)
                                      : at::Tensor();
  auto aux = std::make_shared<at::Tensor>();
  const models::Tensors out =
      root_->forward(inputs, [this, aux, document_ids](const models::Tensors& in) -> py::object {
        py::object positions = in.size() > 1 ? py::cast(in[1]) : py::none();
        py::object ids = document_ids.defined() ? py::cast(document_ids) : py::none();
        py::tuple r = helper_->attr("decoder_forward")(*model_, *decoder_, in[0], router_logits_,
                                                       positions, ids);
        if (!r[1].is_none()) *aux = r[1].cast<at::Tensor>();
        return r[0];
      });
  models::ModelOutput result;
  result.hidden = out[0];
  result.extra_loss = *aux;
  return result;
}

at::Device TransformersModel::device() const {
  for (const Slot& s : slots_)
    if (s.tensor.defined()) return s.tensor.device();
  return at::kCPU;
}

bool TransformersModel::holds_slot(size_t slot, int64_t unit) const {
  // unit: n for decoder layer n, -1 for the untied input embedding, -2 for the root.
  const models::StageParts& p = *stage_;
  if (unit >= 0) return unit >= p.first_layer && unit < p.end_layer;
  if (unit == -1) return p.embedding;
  if (slot == output_slot_ && tied_) return p.embedding || p.head;
  return p.head;  // the head, the final norm (stages.py refuses anything else in the root)
}

void TransformersModel::keep_only(const models::StageParts& parts) {
  const auto n = static_cast<int64_t>(layers_.size());
  models::StageParts p = parts;
  if (p.end_layer < 0) p.end_layer = n;
  TITAN_CHECK(p.first_layer >= 0 && p.first_layer <= p.end_layer && p.end_layer <= n,
              "pipeline stage: layers [", p.first_layer, ", ", p.end_layer,
              ") outside the model's ", n);
  TITAN_CHECK(!router_logits_,
              "parallelism.pipeline_parallel_degree > 1: the Transformers backend does not run "
              "the MoE auxiliary loss (model.moe_load_balancing = \"aux_loss\") under pipeline "
              "parallelism yet; use model.moe_load_balancing = \"none\"");
  stage_ = p;
  std::vector<std::pair<size_t, int64_t>> unit_of;  // (slot, unit)
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t s : layers_[i]->slots()) unit_of.emplace_back(s, static_cast<int64_t>(i));
  if (embedding_)
    for (size_t s : embedding_->slots()) unit_of.emplace_back(s, -1);
  for (size_t s : root_->slots()) unit_of.emplace_back(s, -2);
  py::gil_scoped_acquire gil;
  try {
    py::list names;
    for (const Slot& slot : slots_) names.append(slot.name);
    const py::list all_sites = *sites_;
    receiver_ = hold(python_module("stages").attr("keep_only")(*model_, names, all_sites,
                                                               p.first_layer, p.end_layer, p.head));
    py::list released;
    for (const auto& [slot, unit] : unit_of) {
      if (holds_slot(slot, unit)) continue;
      released.append(all_sites[slot]);
      slots_[slot].released =
          at::empty(slots_[slot].tensor.sizes(), slots_[slot].tensor.options().device(at::kMeta));
      slots_[slot].tensor = at::Tensor();
    }
    python_module("stages").attr("release")(released);
  } catch (const py::error_already_set& e) {
    fail(
        "parallelism.pipeline_parallel_degree > 1: the Transformers backend cannot cut this "
        "model into pipeline stages: ",
        describe(e));
  }
  std::vector<std::unique_ptr<HfUnit>> held;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (static_cast<int64_t>(i) >= p.first_layer && static_cast<int64_t>(i) < p.end_layer)
      held.push_back(std::move(layers_[i]));
  layers_ = std::move(held);
  if (!p.embedding) embedding_.reset();
}

models::StageOutput TransformersModel::forward_stage(const models::StageInput& input) {
  models::StageOutput result;
  if (!stage_) {  // the whole model
    models::PackedDocuments documents{input.positions, input.document_ids, input.positions_end};
    result.hidden = run(input.tokens, documents).hidden;
    return result;
  }
  const bool first = stage_->embedding;
  const at::Tensor& x = first ? input.tokens : input.hidden;
  TITAN_CHECK(x.defined() && x.dim() >= 2, "the Transformers model: the ",
              first ? "token ids [batch, seq]" : "hidden states [batch, seq, hidden]",
              " of this stage are missing");
  const at::Device dev = device();
  const at::Tensor positions =
      input.positions.defined() ? input.positions.to(dev, at::kLong) : at::Tensor();
  const at::Tensor document_ids = pass_document_ids_ && input.document_ids.defined()
                                      ? input.document_ids.to(dev, at::kLong)
                                      : at::Tensor();
  const models::Tensors out = root_->forward(
      {first ? x.to(dev, at::kLong) : x},
      [this, first, positions, document_ids](const models::Tensors& in) {
        auto maybe = [](const at::Tensor& t) { return t.defined() ? py::cast(t) : py::none(); };
        return python_module("stages").attr("stage_forward")(
            *decoder_, first ? py::cast(in[0]) : py::none(), first ? py::none() : py::cast(in[0]),
            *receiver_, maybe(positions), maybe(document_ids));
      });
  result.hidden = out[0];
  return result;
}

at::Tensor TransformersModel::forward_cached(const at::Tensor& input_ids, models::KVCache& cache) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  TITAN_CHECK(!stage_, "titan generate runs the whole Transformers model, not a pipeline stage");
  const at::Tensor ids = input_ids.to(device(), at::kLong);
  std::vector<size_t> all(slots_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  py::gil_scoped_acquire gil;
  // The decoder layers push their own tensors as they run (their units); the rest here.
  push(all);
  py::tuple r;
  try {
    r = python_module("generation")
            .attr("forward_cached")(
                *model_, ids,
                cache.length == 0 || !generation_cache_ ? py::none() : *generation_cache_)
            .cast<py::tuple>();
  } catch (const py::error_already_set& e) {
    fail("the Transformers model failed to decode: ", describe(e));
  }
  generation_cache_ = hold(r[1]);
  cache.length += ids.size(1);
  return r[0].cast<at::Tensor>();
}

models::Module* TransformersModel::embedding_unit() { return embedding_.get(); }

models::Module* TransformersModel::head_unit() {
  for (size_t s : root_->slots())
    if (slots_[s].tensor.defined()) return root_.get();
  return nullptr;
}

at::Tensor TransformersModel::output_weight() { return slots_[output_slot_].tensor; }

NamedTensors TransformersModel::named_parameters() {
  NamedTensors out;
  for (const Slot& s : slots_)
    if (s.tensor.defined()) out.emplace_back(s.name, s.tensor);
  return out;
}

NamedTensors TransformersModel::initialisation_order() {
  NamedTensors out;
  for (const Slot& s : slots_) {
    if (s.tensor.defined()) {
      out.emplace_back(s.name, s.tensor);
    } else if (s.released.defined()) {
      out.emplace_back(s.name, s.released);
    }
  }
  return out;
}

nlohmann::json TransformersModel::hf_config(const std::string& dtype) const {
  std::string text;
  {
    py::gil_scoped_acquire gil;
    text = config_json_->cast<std::string>();
  }
  nlohmann::json config = nlohmann::json::parse(text);
  config["dtype"] = dtype;
  config["torch_dtype"] = dtype;
  return config;
}

models::ModelShape TransformersModel::shape() const {
  const nlohmann::json c = hf_config("float32");
  auto number = [&c](const char* key, int64_t fallback) {
    return c.contains(key) && c[key].is_number_integer() ? c[key].get<int64_t>() : fallback;
  };
  models::ModelShape s;
  s.hidden_size = number("hidden_size", 0);
  s.layers = number("num_hidden_layers", 0);
  s.layers_held = stage_ ? stage_->end_layer - stage_->first_layer : s.layers;
  s.tied_embeddings = tied_;
  s.embedding_name = input_embedding_name_;
  s.heads = number("num_attention_heads", 1);
  s.kv_heads = number("num_key_value_heads", s.heads);
  s.head_dim = number("head_dim", s.hidden_size / std::max<int64_t>(s.heads, 1));
  s.intermediate_size = number("intermediate_size", 4 * s.hidden_size);
  if (number("num_experts", 0) > 0)
    s.intermediate_size =
        number("moe_intermediate_size", s.intermediate_size) * number("num_experts_per_tok", 1);
  return s;
}

std::vector<models::Module*> TransformersModel::modules() {
  std::vector<models::Module*> out;
  if (embedding_) out.push_back(embedding_.get());
  for (auto& layer : layers_) out.push_back(layer.get());
  if (head_unit() != nullptr) out.push_back(root_.get());
  return out;
}

std::vector<models::LoraHost::Weight> TransformersModel::adaptable_weights() {
  py::gil_scoped_acquire gil;
  std::vector<Weight> out;
  for (const py::handle item : helper_->attr("adaptable_modules")(*model_)) {
    const py::tuple t = item.cast<py::tuple>();
    out.push_back({t[1].cast<std::string>(), t[0].cast<std::string>(), t[2].cast<bool>()});
  }
  return out;
}

void TransformersModel::add_adapters(const std::vector<std::string>& weight_names,
                                     const models::LoraOptions& options, const at::TensorOptions&) {
  std::map<std::string, Weight> known;
  for (const Weight& w : adaptable_weights()) known[w.name] = w;
  py::gil_scoped_acquire gil;
  py::list modules;
  for (const std::string& name : weight_names) {
    const auto it = known.find(name);
    TITAN_CHECK(it != known.end(), name, " is not a weight LoRA can adapt");
    TITAN_CHECK(!it->second.experts, "LoRA on ", it->second.module,
                ": the Transformers backend (model.name transformers) adapts nn.Linear modules "
                "only; leave the expert stacks out of lora.target_modules, or use model.name "
                "qwen3");
    modules.append(it->second.module);
  }
  // PEFT reads the base layers' weights (their shapes, dtype and device).
  for (auto& layer : layers_) push(layer->slots());
  py::tuple added;
  try {
    added =
        helper_->attr("inject_lora")(*model_, modules, options.rank, options.alpha, options.dropout)
            .cast<py::tuple>();
  } catch (const py::error_already_set& e) {
    fail("PEFT could not add the LoRA layers: ", describe(e));
  }
  const auto names = added[0].cast<std::vector<std::string>>();
  const py::list tensors = added[1];
  py::list sites = *sites_;
  const auto units = added[3].cast<std::vector<int64_t>>();
  for (size_t i = 0; i < names.size(); ++i) {
    at::Tensor t = tensors[i].cast<at::Tensor>().detach();
    t.requires_grad_(true);
    sites.append(py::list(added[2])[i]);
    slots_.push_back({names[i], t, at::Tensor()});
    layers_.at(units[i])->add_slot(slots_.size() - 1);
  }
  // The Python modules read the new tensors from their first forward on.
  for (auto& layer : layers_) push(layer->slots());
}

int64_t TransformersModel::quantize_frozen_linears(bool double_quantization) {
  std::map<std::string, size_t> slot_of;
  for (size_t i = 0; i < slots_.size(); ++i) slot_of[slots_[i].name] = i;
  const std::vector<Weight> weights = adaptable_weights();
  py::gil_scoped_acquire gil;
  const py::list all_sites = *sites_;
  int64_t bytes = 0;
  for (const Weight& w : weights) {
    const auto it = slot_of.find(w.name);
    if (w.experts || it == slot_of.end()) continue;
    at::Tensor& tensor = slots_[it->second].tensor;
    if (!tensor.defined() || tensor.requires_grad()) continue;
    auto nf4 =
        std::make_shared<models::Nf4Base>(models::quantize_base(tensor, double_quantization));
    const kernels::Implementation& impl = kernels::kernel_registry().default_for(
        kernels::Op::kNf4Linear, tensor.device().type(), compute_dtype_);
    const kernels::Nf4LinearFn kernel = std::get<kernels::Nf4LinearFn>(impl.fn);
    py::cpp_function forward(
        [nf4, kernel](const at::Tensor& x) { return kernel(x, nf4->resolved()); });
    // The module that reads this weight (its first site) calls the kernel from now on.
    const py::tuple site = py::list(all_sites[it->second])[0].cast<py::tuple>();
    helper_->attr("patch_nf4")(site[0], forward);
    tensor = at::Tensor();
    bytes += nf4->bytes();
    quantized_[it->second] = std::move(nf4);
  }
  return bytes;
}

int64_t TransformersModel::quantize_weight(const std::string& name, bool) {
  fail("the Transformers backend quantises its frozen linears together, not ", name, " alone");
}

std::vector<std::pair<std::string, std::vector<int64_t>>> TransformersModel::nf4_weights() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& [slot, nf4] : quantized_)
    out.push_back({slots_[slot].name, {nf4->weight.rows, nf4->weight.cols}});
  return out;
}

at::Tensor TransformersModel::dequantized_weight(const std::string& name) {
  for (const auto& [slot, nf4] : quantized_)
    if (slots_[slot].name == name) return models::dequantize_base(*nf4, at::kFloat);
  fail(name, " is not held in NF4");
}

std::vector<models::Module*> TransformersModel::blocks() {
  std::vector<models::Module*> out;
  for (auto& layer : layers_) out.push_back(layer.get());
  return out;
}

}  // namespace titan::transformers_backend
