#include "titan/lora/lora_targets.h"

#include "titan/common/error.h"
#include "titan/kernels/override_resolver.h"

namespace titan::lora {

bool target_matches(const std::string& entry, const std::string& module) {
  if (entry.find_first_of(".*?") == std::string::npos)
    return module == entry || module.ends_with("." + entry);
  return kernels::module_path_matches(entry, module);
}

std::vector<Target> select_targets(const std::vector<Target>& adaptable,
                                   const config::LoraConfig& lora) {
  TITAN_CHECK(!adaptable.empty(), "LoRA: this model offers no weights to adapt");
  std::vector<Target> out;
  if (lora.target_modules.empty()) {
    for (const Target& t : adaptable)
      if (!t.experts) out.push_back(t);
  } else {
    std::vector<bool> used(lora.target_modules.size(), false);
    for (const Target& t : adaptable) {
      bool take = false;
      for (size_t i = 0; i < lora.target_modules.size(); ++i) {
        if (!target_matches(lora.target_modules[i], t.module)) continue;
        used[i] = true;
        take = true;
      }
      if (take) out.push_back(t);
    }
    for (size_t i = 0; i < used.size(); ++i) {
      TITAN_CHECK(used[i], "lora.target_modules entry \"", lora.target_modules[i],
                  "\" matches no module LoRA can adapt (e.g. ", adaptable.front().module,
                  "; the projections are self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj and "
                  "the expert stacks mlp.experts.{gate_up,down}_proj)");
    }
  }
  TITAN_CHECK(!out.empty(), "LoRA: lora.target_modules selects no weight");
  for (const Target& t : out) {
    if (!t.experts) continue;
    TITAN_CHECK(lora.base_quantization == "none", "lora.base_quantization = \"",
                lora.base_quantization, "\" (QLoRA) quantises linear weights only, but target ",
                t.module,
                " is an expert stack, not a linear weight; leave the experts out of "
                "lora.target_modules or set lora.base_quantization = \"none\"");
    TITAN_CHECK(lora.dropout == 0, "lora.dropout = ", lora.dropout, " cannot apply to ", t.module,
                ": an expert stack's adapter is merged into its weight (as PEFT's ParamWrapper), "
                "which leaves no input to drop out; use lora.dropout = 0 or leave the experts "
                "out of lora.target_modules");
  }
  return out;
}

}  // namespace titan::lora
