#include "titan/lora/merged_weights.h"

#include <algorithm>
#include <map>
#include <set>

#include "titan/models/common/lora.h"

namespace titan::lora {

checkpoint::NativeTensors merged_weights(models::ModelTensors& model, const LoraSetup& setup,
                                         const checkpoint::TensorLayout& layout) {
  checkpoint::NativeTensors out;
  const NamedTensors params = model.named_parameters();
  std::map<std::string, at::Tensor> by_name(params.begin(), params.end());
  // The NF4 weights are dequantised one at a time, when the export asks for each.
  std::set<std::string> quantized;
  models::LoraHost* host = model.lora_host();
  std::map<std::string, Target> adapted;
  for (const Target& t : setup.targets) adapted[t.name] = t;
  const double scale = setup.config.alpha / static_cast<double>(setup.config.rank);

  std::vector<std::string> names;
  for (const auto& [name, local] : params) {
    if (models::is_lora_name(name)) continue;
    names.push_back(name);
    out.metas.emplace_back(
        name, at::empty(layout.piece(name, local).global_shape, local.options().device(at::kMeta)));
  }
  // After the other weights, by name (the order of the export's shards).
  auto nf4 = host->nf4_weights();
  std::sort(nf4.begin(), nf4.end());
  for (const auto& [name, shape] : nf4) {
    names.push_back(name);
    quantized.insert(name);
    out.metas.emplace_back(name, at::empty(shape, at::TensorOptions(at::kMeta).dtype(at::kFloat)));
  }
  out.full = [names, by_name, quantized, host, adapted, scale, &layout](size_t i) -> at::Tensor {
    const std::string& name = names[i];
    const at::Tensor base = quantized.count(name) ? host->dequantized_weight(name)
                                                  : layout.full(name, by_name.at(name));
    const auto t = adapted.find(name);
    if (t == adapted.end()) return base;
    const std::string a_name = models::lora_a_name(name), b_name = models::lora_b_name(name);
    const at::Tensor a = layout.full(a_name, by_name.at(a_name)).to(at::kFloat);
    const at::Tensor b = layout.full(b_name, by_name.at(b_name)).to(at::kFloat);
    const at::Tensor delta = t->second.experts ? at::bmm(b, a) : at::mm(b, a);
    // In float32: the export rounds once, to checkpoint.export_dtype.
    return base.to(at::kFloat) + delta * scale;
  };
  return out;
}

}  // namespace titan::lora
