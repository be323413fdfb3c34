#include "titan/models/common/hf_state_dict_adapter.h"

#include <optional>
#include <set>
#include <sstream>

#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::models {
namespace {

const std::string kFusedGateUp = ".mlp.experts.gate_up_proj";
const std::string kFusedDown = ".mlp.experts.down_proj";
const std::string kEmbed = "model.embed_tokens.weight";
const std::string kLmHead = "lm_head.weight";

// "<layer prefix>.mlp.experts.<e>.<proj>.weight"
std::string expert_key(const std::string& experts_prefix, int64_t e, const char* proj) {
  return experts_prefix + "." + std::to_string(e) + "." + proj + ".weight";
}

NamedTensors to_hf(const NamedTensors& native) {
  NamedTensors out;
  for (const auto& [name, t] : native) {
    if (name.ends_with(kFusedGateUp)) {
      const std::string prefix = name.substr(0, name.size() - std::string(".gate_up_proj").size());
      const int64_t im = t.size(1) / 2;
      for (int64_t e = 0; e < t.size(0); ++e) {
        out.emplace_back(expert_key(prefix, e, "gate_proj"), t[e].slice(0, 0, im));
        out.emplace_back(expert_key(prefix, e, "up_proj"), t[e].slice(0, im));
      }
    } else if (name.ends_with(kFusedDown)) {
      const std::string prefix = name.substr(0, name.size() - std::string(".down_proj").size());
      for (int64_t e = 0; e < t.size(0); ++e) {
        out.emplace_back(expert_key(prefix, e, "down_proj"), t[e]);
      }
    } else {
      out.emplace_back(name, t);
    }
  }
  return out;
}

// Collects every problem, so one error lists all of them.
class Matcher {
 public:
  Matcher(const std::vector<std::string>& keys,
          const std::function<at::Tensor(const std::string&)>& read)
      : available_(keys.begin(), keys.end()), read_(read) {}

  bool has(const std::string& key) const { return available_.count(key) > 0; }

  // Reads `key` and checks its shape; undefined tensor (and a recorded problem) otherwise.
  at::Tensor take(const std::string& key, at::IntArrayRef expected_shape) {
    if (!has(key)) {
      missing_.push_back(key);
      return {};
    }
    used_.insert(key);
    at::Tensor t = read_(key);
    if (t.sizes() != expected_shape) {
      wrong_shape_.push_back(key + " is " + shape_to_string(t.sizes()) + ", expected " +
                             shape_to_string(expected_shape));
      return {};
    }
    return t;
  }
  at::Tensor read_unchecked(const std::string& key) {
    used_.insert(key);
    return read_(key);
  }
  void mark_used(const std::string& key) { used_.insert(key); }
  void add_problem(const char* problem) { other_.emplace_back(problem); }

  void throw_if_problems() const {
    std::vector<std::string> unexpected;
    for (const auto& key : available_) {
      if (!used_.count(key)) unexpected.push_back(key);
    }
    if (missing_.empty() && unexpected.empty() && wrong_shape_.empty() && other_.empty()) return;
    std::ostringstream out;
    out << "checkpoint does not match the model:";
    list(out, "missing tensors", missing_);
    list(out, "unexpected tensors", unexpected);
    list(out, "wrong shapes", wrong_shape_);
    list(out, "other", other_);
    throw Error(out.str());
  }

 private:
  static void list(std::ostringstream& out, const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    out << " " << what << " (" << v.size() << "): ";
    const size_t shown = std::min<size_t>(v.size(), 8);
    for (size_t i = 0; i < shown; ++i) out << (i ? ", " : "") << v[i];
    if (shown < v.size()) out << ", ...";
    out << ";";
  }

  std::set<std::string> available_;
  std::set<std::string> used_;
  const std::function<at::Tensor(const std::string&)>& read_;
  std::vector<std::string> missing_, wrong_shape_, other_;
};

// A tensor of the file as it is (a view of the mapping: nothing is read until it is used).
LazyTensor as_is(const at::Tensor& view) {
  return {view, [view] { return view; }};
}

// A fused stack assembled from per-expert views when read; `preview` is a meta tensor.
LazyTensor assembled(at::IntArrayRef shape, at::ScalarType dtype,
                     std::function<at::Tensor()> assemble) {
  return {at::empty(shape, at::TensorOptions(at::kMeta).dtype(dtype)), std::move(assemble)};
}

// Fused [E, 2*Im, H] from the checkpoint's fused tensor or its per-expert gate/up tensors.
std::optional<LazyTensor> load_gate_up(Matcher& m, const std::string& name, at::IntArrayRef shape) {
  if (m.has(name)) {
    const at::Tensor t = m.take(name, shape);
    return t.defined() ? std::optional(as_is(t)) : std::nullopt;
  }
  const std::string prefix = name.substr(0, name.size() - std::string(".gate_up_proj").size());
  const int64_t num_experts = shape[0], im = shape[1] / 2, hidden = shape[2];
  std::vector<at::Tensor> gates, ups;
  bool complete = true;
  for (int64_t e = 0; e < num_experts; ++e) {
    gates.push_back(m.take(expert_key(prefix, e, "gate_proj"), {im, hidden}));
    ups.push_back(m.take(expert_key(prefix, e, "up_proj"), {im, hidden}));
    complete = complete && gates.back().defined() && ups.back().defined();
  }
  if (!complete) return std::nullopt;
  return assembled(shape, gates[0].scalar_type(), [gates, ups] {
    return at::cat({at::stack(gates), at::stack(ups)}, 1);
  });
}

std::optional<LazyTensor> load_down(Matcher& m, const std::string& name, at::IntArrayRef shape) {
  if (m.has(name)) {
    const at::Tensor t = m.take(name, shape);
    return t.defined() ? std::optional(as_is(t)) : std::nullopt;
  }
  const std::string prefix = name.substr(0, name.size() - std::string(".down_proj").size());
  std::vector<at::Tensor> downs;
  bool complete = true;
  for (int64_t e = 0; e < shape[0]; ++e) {
    downs.push_back(m.take(expert_key(prefix, e, "down_proj"), {shape[1], shape[2]}));
    complete = complete && downs.back().defined();
  }
  if (!complete) return std::nullopt;
  return assembled(shape, downs[0].scalar_type(), [downs] { return at::stack(downs); });
}

LazyTensors from_hf(const std::vector<std::string>& hf_keys,
                    const std::function<at::Tensor(const std::string&)>& read,
                    const NamedTensors& expected) {
  Matcher m(hf_keys, read);
  bool tied = true;
  for (const auto& [name, _] : expected) tied = tied && name != kLmHead;
  // Non-persistent buffers some old exports contain.
  for (const auto& key : hf_keys) {
    if (key.ends_with("rotary_emb.inv_freq")) m.mark_used(key);
  }

  LazyTensors out;
  for (const auto& [name, want] : expected) {
    const at::IntArrayRef shape = want.sizes();
    std::optional<LazyTensor> t;
    if (name.ends_with(kFusedGateUp)) {
      t = load_gate_up(m, name, shape);
    } else if (name.ends_with(kFusedDown)) {
      t = load_down(m, name, shape);
    } else {
      // A tied embedding may come as lm_head.weight alone, as transformers v5 loads it.
      const bool head_only = name == kEmbed && tied && !m.has(kEmbed) && m.has(kLmHead);
      const at::Tensor view = m.take(head_only ? kLmHead : name, shape);
      if (view.defined()) t = as_is(view);
    }
    if (t) out.emplace_back(name, std::move(*t));
  }
  // A tied model can hold lm_head.weight only if it is the embedding itself.
  if (tied && m.has(kLmHead) && m.has(kEmbed)) {
    const at::Tensor head = m.read_unchecked(kLmHead);
    const at::Tensor embed = read(kEmbed);
    if (head.sizes() != embed.sizes() || head.scalar_type() != embed.scalar_type() ||
        !at::equal(head, embed)) {
      m.add_problem(
          "lm_head.weight differs from model.embed_tokens.weight but the config has "
          "tie_word_embeddings=true");
    }
  }
  m.throw_if_problems();
  return out;
}

}  // namespace

StateDictAdapter decoder_state_dict_adapter() {
  StateDictAdapter adapter;
  adapter.to_hf = to_hf;
  adapter.from_hf = from_hf;
  return adapter;
}

}  // namespace titan::models
