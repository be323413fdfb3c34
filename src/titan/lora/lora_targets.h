// Which of a model's weights LoRA adapts: lora.target_modules, globs over the Hugging Face
// module paths (docs/lora.md), against the weights the model offers (models::LoraHost).
#pragma once

#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/models/model.h"

namespace titan::lora {

using Target = models::LoraHost::Weight;

// The targets, in the model's order. An empty target_modules means PEFT's "all-linear" less
// the output head: every attention and dense MLP projection (not the expert stacks, which are
// no nn.Linear in Transformers either). Each entry is a glob over whole module paths ('*'
// crosses dots) or, with no '.', '*' or '?' in it, a module's last name ("q_proj") as PEFT
// matches it. Throws titan::Error naming an entry that matches nothing, and refusing QLoRA or
// dropout on an expert stack (PEFT runs neither there).
std::vector<Target> select_targets(const std::vector<Target>& adaptable,
                                   const config::LoraConfig& lora);

// Whether one target_modules entry matches a module path.
bool target_matches(const std::string& entry, const std::string& module);

}  // namespace titan::lora
