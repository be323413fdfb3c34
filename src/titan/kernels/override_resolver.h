// Which implementation of each overridable op runs where: the `override.imports` entries of
// the config, resolved against the call sites of a model as it is built (the C++ counterpart
// of torchtitan's override registry).
//
// An entry is "OP=IMPL" (every call site of OP) or "OP=IMPL@GLOB": the call sites whose module
// path matches GLOB, where '*' matches any characters, dots included ("layers.1.*" matches
// "layers.1.attention_norm" and "layers.1.moe", not "layers.10.moe"). Call sites no entry
// claims use the op's default for the run's device and dtype (KernelRegistry::default_for):
// `reference`, except where a built-in kernel is the default (cross_entropy on the CPU). A
// model resolves each call site once, while it is built, and keeps the function pointer:
// nothing is looked up per call.
//
// Errors (titan::Error, naming the entry): an unknown op or implementation (listing the known
// ones), two entries of the same op claiming one call site, an entry that matches no call site
// of its op, and an implementation that does not support the run's device and dtype (unless
// `fallback`, which then uses reference with a warning).
#pragma once

#include <string>
#include <vector>

#include "titan/common/error.h"
#include "titan/kernels/registry.h"

namespace titan::kernels {

// What resolve() and finish() throw: a titan::Error about the override entries themselves.
class OverrideError : public Error {
 public:
  using Error::Error;
};

struct OverrideEntry {
  std::string text;  // the entry as written, for messages
  Op op = Op::kRmsNorm;
  std::string implementation;
  std::string glob = "*";
};

// Parses "OP=IMPL" or "OP=IMPL@GLOB" (the op name is checked, the implementation is not).
OverrideEntry parse_override_entry(const std::string& text);

// Whether `glob` matches the whole module path; '*' also crosses dots, '?' is one character.
bool module_path_matches(const std::string& glob, const std::string& path);

struct OverrideSettings {
  std::vector<std::string> imports;   // override.imports
  bool fallback = false;              // override.fallback
  at::DeviceType device = at::kCPU;   // where the model computes
  at::ScalarType dtype = at::kFloat;  // the activations' (compute) dtype
  bool defaults = true;  // unclaimed call sites use the op's default (false: reference)
};

// One decision: op `op` at module `path` uses `implementation`.
struct OverrideChoice {
  Op op;
  std::string path;
  std::string implementation;
  bool claimed = false;  // by an override.imports entry (else the op's default)
};

class OverrideResolver {
 public:
  // No entries and no defaults: reference everywhere.
  OverrideResolver();
  // Parses every entry and checks that its implementation is registered.
  explicit OverrideResolver(OverrideSettings settings,
                            const KernelRegistry& registry = kernel_registry());

  // The implementation for `op` at module `path` (recorded for finish()/table()).
  const Implementation& resolve(Op op, const std::string& path);
  template <Op op>
  OpFunctionOf<op> function(const std::string& path) {
    return std::get<static_cast<size_t>(op)>(resolve(op, path).fn);
  }

  // Called once every call site is resolved: throws for an entry that matched none.
  void finish() const;

  // The decisions so far, in resolution order.
  const std::vector<OverrideChoice>& choices() const { return choices_; }
  // One line per (op, implementation): "moe_experts: layers.1.moe, layers.3.moe -> fused";
  // three or more numbered siblings are written as a range, "layers.{0..27}.ffn_norm". Only
  // the call sites an entry claimed for an implementation other than reference unless
  // `include_reference` (then every call site, defaults included).
  std::vector<std::string> summary(bool include_reference) const;

 private:
  const Implementation& resolve_unchecked(Op op, const std::string& path);
  std::string unmatched_message(size_t entry) const;
  const KernelRegistry* registry_;
  OverrideSettings settings_;
  std::vector<OverrideEntry> entries_;
  std::vector<int64_t> matches_;  // call sites each entry claimed
  std::vector<OverrideChoice> choices_;
};

}  // namespace titan::kernels
