#include "titan/cli/config_groups.h"

#include <array>
#include <regex>

namespace titan::cli {
namespace {

struct Group {
  const char* title;
  int shown;  // where the group is listed (the order a newcomer goes through them)
  bool (*holds)(const std::string& name);
};

bool has(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// Checked in this order: a function belongs to the first group that holds it.
const std::array<Group, 8> kGroups = {{
    {"`make train`", 7, [](const std::string& n) { return has(n, "default_job"); }},
    {"fused kernels (the third path)", 6,
     [](const std::string& n) { return has(n, "titan_kernels"); }},
    {"LoRA / QLoRA", 3, [](const std::string& n) { return has(n, "lora"); }},
    {"SFT on chat records", 4, [](const std::string& n) { return has(n, "sft"); }},
    {"fine-tune a Hugging Face folder", 2, [](const std::string& n) { return has(n, "finetune"); }},
    {"parallel layouts", 5,
     [](const std::string& n) {
       static const std::regex layout(".*_(ep|tp)[0-9]+$");
       return std::regex_match(n, layout);
     }},
    {"debug models (2 CPU cores)", 0, [](const std::string& n) { return has(n, "debugmodel"); }},
    {"training at a published size", 1, [](const std::string&) { return true; }},
}};

}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> config_groups(
    const config::ConfigRegistry& registry, const std::string& module) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out(kGroups.size());
  for (const Group& group : kGroups) out[group.shown].first = group.title;
  for (const config::ConfigFunction& fn : registry.functions(module)) {
    for (const Group& group : kGroups) {
      if (group.holds(fn.name)) {
        out[group.shown].second.push_back(fn.name);
        break;
      }
    }
  }
  std::erase_if(out, [](const auto& group) { return group.second.empty(); });
  return out;
}

}  // namespace titan::cli
