// The kernel registry: every implementation of every overridable op (ops.h) known to this
// process, by op and name. `reference` (plain ATen) is always there; the built-in kernels of
// kernels/cpu and kernels/cuda register themselves beside it, and shared libraries named in
// `override.libraries` add theirs at start-up (load_library). One of the few globals: a
// registry. Which implementation a model uses where is decided by override_resolver.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/kernels/ops.h"

namespace titan::kernels {

struct Implementation {
  std::string name;         // "reference", "fused", ...
  std::string origin;       // "built-in" or the path of the library that registered it
  std::string description;  // one line, for listings
  OpFunction fn;
  SupportsFn supports_fn = nullptr;  // nullptr: every device and dtype
  // Where this is the op's default, what the call sites no override.imports entry claims use
  // (nullptr: nowhere; reference is the default where no implementation is). Only built-in
  // kernels that beat reference there are defaults.
  SupportsFn default_fn = nullptr;

  Op op() const { return op_of(fn); }
  bool supports(at::DeviceType device, at::ScalarType dtype) const {
    return supports_fn == nullptr || supports_fn(device, dtype);
  }
  bool is_default(at::DeviceType device, at::ScalarType dtype) const {
    return default_fn != nullptr && default_fn(device, dtype) && supports(device, dtype);
  }
};

class KernelRegistry {
 public:
  KernelRegistry();  // registers the built-in implementations
  ~KernelRegistry();
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // Throws titan::Error when the op already has an implementation of that name (naming both
  // origins) or the name is empty.
  void add(Implementation impl);

  // Throws titan::Error listing the op's implementations when `name` is not one of them.
  const Implementation& get(Op op, const std::string& name) const;
  bool has(Op op, const std::string& name) const;
  // Names of the op's implementations, in registration order (reference first).
  std::vector<std::string> names(Op op) const;
  // The op's default for activations of `dtype` on `device`: the first implementation that is
  // the default there, else reference.
  const Implementation& default_for(Op op, at::DeviceType device, at::ScalarType dtype) const;

  // dlopens `path` (kept open for the life of the registry), checks its ABI and torch versions
  // and lets it register its implementations. A library already loaded is not loaded again.
  // Throws titan::Error naming the library for a missing file, missing entry points, a version
  // mismatch or a duplicate implementation name.
  void load_library(const std::string& path);

 private:
  struct Library;
  void check_new(const Implementation& impl) const;
  std::vector<std::vector<Implementation>> by_op_;  // indexed by Op
  std::vector<std::unique_ptr<Library>> libraries_;
};

// The process's registry, created (with the built-ins) on first use.
KernelRegistry& kernel_registry();

// Op for a config name ("rms_norm"); throws titan::Error listing the op names otherwise.
Op op_from_name(const std::string& name, const std::string& where);

}  // namespace titan::kernels
