#include "titan/checkpoint/torchtitan_checkpoint.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "titan/checkpoint/dcp_writer.h"
#include "titan/checkpoint/pickle_writer.h"
#include "titan/checkpoint/restricted_unpickler.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::checkpoint {
namespace {

using pickle::Value;
using Kind = Value::Kind;

constexpr const char* kEmbedding = "tok_embeddings.weight";
const std::vector<std::string> kOptimizerFields = {"exp_avg", "exp_avg_sq", "step"};
// The entries torchtitan keeps beside the model's, by their first component.
const std::vector<std::string> kTrainingParts = {"optimizer.", "lr_scheduler.", "dataloader.",
                                                 "train_state."};

bool is_training_entry(const std::string& fqn) {
  return std::any_of(kTrainingParts.begin(), kTrainingParts.end(),
                     [&](const std::string& p) { return fqn.rfind(p, 0) == 0; });
}

// "Qwen3 dense, 8 layers, dim 256, vocabulary 2048": what a torchtitan checkpoint's shapes say
// it is.
std::string describe_checkpoint(const DcpMetadata& md, const std::string& prefix) {
  std::set<int64_t> layers;
  bool qk_norm = false, moe = false;
  int64_t experts = 0;
  for (const auto& [fqn, info] : md.tensors) {
    if (is_training_entry(fqn) || fqn.rfind(prefix + "layers.", 0) != 0) continue;
    const std::string rest = fqn.substr(prefix.size() + 7);
    layers.insert(std::atoll(rest.c_str()));
    qk_norm = qk_norm || fqn.ends_with(".attention.q_norm.weight");
    if (fqn.ends_with(".moe.router.gate.weight")) {
      moe = true;
      experts = info.size.empty() ? 0 : info.size[0];
    }
  }
  std::ostringstream out;
  out << (qk_norm ? "Qwen3" : "Llama 3") << (moe ? " MoE" : " dense");
  if (moe) out << " (" << experts << " experts)";
  out << ", " << layers.size() << " layers";
  auto embedding = md.tensors.find(prefix + kEmbedding);
  if (embedding != md.tensors.end() && embedding->second.size.size() == 2)
    out << ", dim " << embedding->second.size[1] << ", vocabulary " << embedding->second.size[0];
  return out.str();
}

std::string describe_model(const nlohmann::json& hf) {
  std::ostringstream out;
  const std::string type = hf.value("model_type", "");
  const bool moe = hf.value("num_experts", int64_t{0}) > 0;
  out << (type == "llama" ? "Llama 3" : "Qwen3") << (moe ? " MoE" : " dense");
  if (moe) out << " (" << hf.value("num_experts", int64_t{0}) << " experts)";
  out << ", " << hf.value("num_hidden_layers", int64_t{0}) << " layers, dim "
      << hf.value("hidden_size", int64_t{0}) << ", vocabulary "
      << hf.value("vocab_size", int64_t{0});
  return out.str();
}

// The shape the tensors of `source` make, from the metadata; nullopt with a problem recorded.
std::optional<std::vector<int64_t>> source_shape(const DcpMetadata& md,
                                                 const std::vector<std::string>& saved_names,
                                                 const TorchtitanSource& source,
                                                 const TorchtitanModel& model) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < saved_names.size(); ++i) {
    auto it = md.tensors.find(saved_names[i]);
    if (it == md.tensors.end()) return std::nullopt;
    if (i == 0) {
      shape = it->second.size;
    } else if (source.join_dim < static_cast<int64_t>(shape.size())) {
      shape[source.join_dim] += it->second.size[source.join_dim];
    }
  }
  if (source.qkv_part >= 0 && shape.size() == 2) {
    const int64_t rows = source.qkv_part == 0 ? model.n_heads : model.n_kv_heads;
    shape[0] = rows * model.head_dim;
  }
  return shape;
}

int64_t integer_item(const DcpReader& reader, const std::string& fqn, int64_t otherwise) {
  if (!reader.metadata().is_item(fqn)) return otherwise;
  const pickle::ValuePtr v = reader.item(fqn);
  TITAN_CHECK(v->is_int(), reader.dir(), ": ", fqn, " is ", pickle::describe(*v),
              ", expected an integer");
  return v->integer;
}

nlohmann::json to_json(const Value& v) {
  switch (v.kind) {
    case Kind::kNone:
      return nullptr;
    case Kind::kBool:
      return v.boolean;
    case Kind::kInt:
      return v.integer;
    case Kind::kFloat:
      return v.real;
    case Kind::kString:
      return v.text;
    case Kind::kTuple:
    case Kind::kList: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& item : v.items) a.push_back(to_json(*item));
      return a;
    }
    case Kind::kDict: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, item] : v.entries)
        if (k->is_string()) o[k->text] = to_json(*item);
      return o;
    }
    default:
      return pickle::describe(v);
  }
}

// torchtitan's data position of one rank, from its dp_rank_R item: a pickle (bytes) of
// StatefulDataLoader.state_dict(), whose dataset_state is HuggingFaceTextDataset's.
nlohmann::json dataset_state(const DcpReader& reader, const std::string& fqn) {
  const pickle::ValuePtr blob = reader.item(fqn);
  TITAN_CHECK(blob->kind == Kind::kBytes, reader.dir(), ": ", fqn, " is ", pickle::describe(*blob),
              ", expected the data loader's pickled state");
  const pickle::ValuePtr state =
      pickle::unpickle(reinterpret_cast<const uint8_t*>(blob->text.data()), blob->text.size(),
                       pickle::Admits::kPlainData, reader.dir() + " (" + fqn + ")");
  const Value* dataset = state->get("dataset_state");
  TITAN_CHECK(dataset != nullptr && dataset->kind == Kind::kDict, reader.dir(), ": ", fqn,
              " has no dataset_state (not torchtitan's text dataset)");
  nlohmann::json out;
  for (const char* key : {"sample_idx", "epoch", "inputs_buffer", "labels_buffer"}) {
    const Value* v = dataset->get(key);
    TITAN_CHECK(v != nullptr, reader.dir(), ": ", fqn, "'s dataset_state has no ", key,
                " (not torchtitan 0.3.0's text dataset)");
    out[key] = to_json(*v);
  }
  return out;
}

}  // namespace

bool is_torchtitan_checkpoint(const std::string& dir) {
  if (!is_dcp_checkpoint(dir)) return false;
  try {
    const DcpMetadata md = read_dcp_metadata(dir);
    return md.tensors.count(kEmbedding) || md.tensors.count(std::string("model.") + kEmbedding);
  } catch (const Error&) {
    return true;  // a DCP folder all the same: reading it says what is wrong
  }
}

TorchtitanCheckpointReader::TorchtitanCheckpointReader(const std::string& dir,
                                                       const NamedTensors& params,
                                                       const NamedTensors& buffers,
                                                       const nlohmann::json& hf_config,
                                                       const std::string& model_description)
    : reader_(dir), model_(TorchtitanModel::from_hf_config(hf_config)) {
  const DcpMetadata& md = reader_.metadata();
  if (!md.tensors.count(kEmbedding) && md.tensors.count(std::string("model.") + kEmbedding))
    prefix_ = "model.";
  TITAN_CHECK(md.tensors.count(prefix_ + kEmbedding), dir,
              " is a DCP checkpoint but not one of torchtitan's decoders (it has no ", kEmbedding,
              ")");
  const std::string mismatch = dir + " is a torchtitan checkpoint of " +
                               describe_checkpoint(md, prefix_) + ", but this run's model is " +
                               model_description + " (" + describe_model(hf_config) + ")";
  std::vector<std::string> missing, wrong;
  std::set<std::string> used;
  // The model: every titan tensor from its torchtitan entries, shapes checked.
  NamedTensors all = params;
  all.insert(all.end(), buffers.begin(), buffers.end());
  for (const auto& [name, want] : all) {
    std::optional<TorchtitanSource> source = torchtitan_model_source(name, model_);
    if (!source) {
      missing.push_back(name + " (no torchtitan name)");
      continue;
    }
    for (std::string& n : source->names) n = resolve(n);
    const auto shape = source_shape(md, source->names, *source, model_);
    if (!shape) {
      for (const std::string& n : source->names)
        if (!md.tensors.count(n)) missing.push_back(n);
      continue;
    }
    used.insert(source->names.begin(), source->names.end());
    if (*shape != want.sizes().vec()) {
      wrong.push_back(source->names[0] + " is " + shape_to_string(*shape) + ", the model's " +
                      name + " " + shape_to_string(want.sizes()));
      continue;
    }
    model_sources_[name] = *source;
  }
  // What the model does not take: a tied head (checked equal to the embedding when read),
  // an expert bias the model does not use.
  std::vector<std::string> unexpected;
  for (const auto& [fqn, info] : md.tensors) {
    if (used.count(fqn) || is_training_entry(fqn)) continue;
    if (fqn == resolve("lm_head.weight") && !model_sources_.count("lm_head.weight")) continue;
    if (fqn.ends_with(".expert_bias_E")) {
      if (notes_.empty() || notes_.back().find("expert_bias_E") == std::string::npos)
        notes_.push_back(
            "the MoE layers' expert_bias_E (torchtitan's aux-loss-free balancing): this run's "
            "model.moe_load_balancing is not expert_bias, so the biases are dropped");
      continue;
    }
    unexpected.push_back(fqn);
  }
  if (!missing.empty() || !wrong.empty() || !unexpected.empty()) {
    std::ostringstream out;
    out << mismatch << ":";
    const auto list = [&](const char* what, const std::vector<std::string>& v) {
      if (v.empty()) return;
      out << " " << what << " (" << v.size() << "): ";
      for (size_t i = 0; i < std::min<size_t>(v.size(), 4); ++i) out << (i ? ", " : "") << v[i];
      out << (v.size() > 4 ? ", ...;" : ";");
    };
    list("missing", missing);
    list("wrong shapes", wrong);
    list("not in the model", unexpected);
    out << " give the model it was trained as (model.flavor, or model.flavor auto with a "
           "config.json in model.hf_assets_path)";
    throw Error(out.str());
  }
  // The optimizer: present only in a full checkpoint.
  full_ = std::any_of(md.tensors.begin(), md.tensors.end(), [](const auto& entry) {
    return entry.first.rfind("optimizer.state.", 0) == 0;
  });
  if (full_) {
    for (const auto& [name, want] : params) {
      const auto layer_fused = [&] {
        const auto s = torchtitan_param_source(name, model_, true);
        return s && md.tensors.count("optimizer.state." + s->names[0] + ".exp_avg");
      }();
      std::optional<TorchtitanSource> source = torchtitan_param_source(name, model_, layer_fused);
      for (const std::string& field : kOptimizerFields) {
        TorchtitanSource s = *source;
        for (std::string& n : s.names) n = "optimizer.state." + resolve(n) + "." + field;
        for (const std::string& n : s.names)
          TITAN_CHECK(md.tensors.count(n), dir, ": a full torchtitan checkpoint without ", n,
                      " (the optimizer state of ", name, ")");
        if (field == "step") {
          s.names.resize(1);  // a scalar: the first's
          s.qkv_part = -1;
          s.permute_heads = 0;
        }
        optimizer_sources_[name + "." + field] = s;
        optimizer_order_.push_back(name + "." + field);
      }
    }
    read_training_state();
  }
}

std::string TorchtitanCheckpointReader::resolve(const std::string& torchtitan_name) const {
  const DcpMetadata& md = reader_.metadata();
  const std::string name = prefix_ + torchtitan_name;
  if (md.tensors.count(name) || md.tensors.count("optimizer.state." + name + ".exp_avg"))
    return name;
  // torchtitan 0.1 and 0.2 named the projections without qkv_linear and the head "output".
  std::string older = name;
  if (const size_t at = older.find(".qkv_linear."); at != std::string::npos)
    older.replace(at, 12, ".");
  if (older == prefix_ + "lm_head.weight") older = prefix_ + "output.weight";
  if (md.tensors.count(older) || md.tensors.count("optimizer.state." + older + ".exp_avg"))
    return older;
  return name;
}

void TorchtitanCheckpointReader::read_training_state() {
  step_ = integer_item(reader_, "train_state.step", 0);
  tokens_seen_ = integer_item(reader_, "train_state.ntokens_seen", 0);
  lr_last_epoch_ = integer_item(reader_, "lr_scheduler.last_epoch", step_);
  // The first parameter's group (torchtitan's AdamW has one).
  const DcpMetadata& md = reader_.metadata();
  const std::string groups = "optimizer.param_groups.";
  for (const std::string& item : md.items) {
    if (item.rfind(groups, 0) != 0) continue;
    const std::string rest = item.substr(groups.size());
    const size_t dot = rest.rfind('.');
    const std::string param = rest.substr(0, dot);
    if (!param_group_.is_null() && param_group_.value("__param", "") != param) continue;
    param_group_["__param"] = param;
    param_group_[rest.substr(dot + 1)] = to_json(*reader_.item(item));
  }
  if (param_group_.is_object()) param_group_.erase("__param");
  // The data position.
  const int64_t world = integer_item(reader_, "dataloader.world_size", 0);
  if (world <= 0) {
    notes_.push_back("no data position (the checkpoint has no dataloader state)");
    return;
  }
  nlohmann::json ranks = nlohmann::json::array();
  try {
    for (int64_t r = 0; r < world; ++r)
      ranks.push_back(dataset_state(reader_, "dataloader.dp_rank_" + std::to_string(r)));
    dataloader_ = {{"world_size", world}, {"ranks", ranks}};
  } catch (const Error& e) {
    notes_.push_back(std::string("the data position: ") + e.what());
  }
}

at::Tensor TorchtitanCheckpointReader::model_tensor(const std::string& name) const {
  auto it = model_sources_.find(name);
  TITAN_CHECK(it != model_sources_.end(), dir(), ": no torchtitan tensor for ", name);
  std::vector<at::Tensor> parts;
  for (const std::string& n : it->second.names) parts.push_back(reader_.tensor(n));
  at::Tensor t = from_torchtitan(it->second, parts, model_);
  if (name == "model.embed_tokens.weight" && !model_sources_.count("lm_head.weight") &&
      reader_.metadata().tensors.count(resolve("lm_head.weight"))) {
    // A tied model: torchtitan saves the head too, which must be the embedding itself.
    const at::Tensor head = reader_.tensor(resolve("lm_head.weight"));
    TITAN_CHECK(head.sizes() == t.sizes() && at::equal(head, t), dir(),
                ": lm_head.weight differs from tok_embeddings.weight, but this run's model ties "
                "them (tie_word_embeddings): the checkpoint is of an untied model");
  }
  return t;
}

std::vector<std::string> TorchtitanCheckpointReader::model_names() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : model_sources_) names.push_back(name);
  return names;
}

std::vector<std::string> TorchtitanCheckpointReader::optimizer_names() const {
  return optimizer_order_;
}

at::Tensor TorchtitanCheckpointReader::optimizer_tensor(const std::string& name) const {
  auto it = optimizer_sources_.find(name);
  TITAN_CHECK(it != optimizer_sources_.end(), dir(), ": no optimizer state ", name);
  std::vector<at::Tensor> parts;
  for (const std::string& n : it->second.names) parts.push_back(reader_.tensor(n));
  return from_torchtitan(it->second, parts, model_);
}

void write_torchtitan_checkpoint(const std::string& dir, const TorchtitanExport& state,
                                 const nlohmann::json& hf_config) {
  const TorchtitanModel model = TorchtitanModel::from_hf_config(hf_config);
  DcpWriter writer;
  // torchtitan's MoE layers keep an expert bias buffer: a model without one gets zeros, the
  // bias that changes no routing.
  NamedTensors titan = state.model;
  for (const auto& [name, t] : state.model) {
    if (!name.ends_with(".mlp.gate.weight")) continue;
    const std::string bias =
        name.substr(0, name.size() - std::string("gate.weight").size()) + "expert_bias";
    const bool has = std::any_of(state.model.begin(), state.model.end(),
                                 [&](const auto& e) { return e.first == bias; });
    if (!has) titan.emplace_back(bias, at::zeros({t.size(0)}, at::kFloat));
  }
  for (const auto& [name, t] : to_torchtitan_model(titan, model, state.tied)) {
    const bool buffer = is_torchtitan_buffer(name);
    writer.add_tensor(name, buffer ? t.to(at::kFloat) : t.to(state.dtype));
  }
  if (!state.optimizer.empty()) {
    // The moments, laid out as torchtitan's parameters (q, k, v fused), then every
    // parameter's step (a float32 scalar; the fused wqkv takes q's).
    std::vector<std::string> params;
    for (const char* field : {"exp_avg", "exp_avg_sq"}) {
      const std::string suffix = std::string(".") + field;
      NamedTensors per_param;
      for (const auto& [key, t] : state.optimizer)
        if (key.ends_with(suffix))
          per_param.emplace_back(key.substr(0, key.size() - suffix.size()), t);
      for (const auto& [name, t] : to_torchtitan_params(per_param, model)) {
        writer.add_tensor("optimizer.state." + name + suffix, t.to(at::kFloat),
                          {"optimizer", "state." + name + suffix});
        if (suffix == ".exp_avg") params.push_back(name);
      }
    }
    std::set<std::string> stepped;
    for (const auto& [key, t] : state.optimizer) {
      if (!key.ends_with(".step")) continue;
      for (const std::string& name : torchtitan_param_names(key.substr(0, key.size() - 5), model)) {
        if (!stepped.insert(name).second) continue;
        writer.add_tensor("optimizer.state." + name + ".step", t.reshape({}).to(at::kFloat),
                          {"optimizer", "state." + name + ".step"});
      }
    }
    // Every parameter's group settings (torchtitan's load reads each group's first).
    nlohmann::json group = {{"amsgrad", false},
                            {"foreach", false},
                            {"maximize", false},
                            {"capturable", false},
                            {"differentiable", false},
                            {"fused", true},
                            {"decoupled_weight_decay", true}};
    group.update(state.param_group);
    for (const std::string& param : params) {
      for (const auto& [key, value] : group.items()) {
        const std::string path = "param_groups." + param + "." + key;
        if (key == "betas") {
          pickle::PickleWriter p;  // a tuple, as torch keeps it
          p.real_tuple(value.get<std::vector<double>>());
          writer.add_pickled_item("optimizer." + path, p.finish(), {"optimizer", path});
        } else {
          writer.add_item("optimizer." + path, value, {"optimizer", path});
        }
      }
    }
    writer.add_item("lr_scheduler.last_epoch", state.step, {"lr_scheduler", "last_epoch"});
    writer.add_item("train_state.step", state.step, {"train_state", "step"});
    writer.add_item("train_state.ntokens_seen", state.tokens_seen, {"train_state", "ntokens_seen"});
  }
  writer.write(dir);
}

}  // namespace titan::checkpoint
