#include "titan/kernels/registry.h"

#include <dlfcn.h>

#include <filesystem>
#include <string_view>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/kernels/builtin_kernels.h"
#include "titan/kernels/plugin_api.h"

namespace titan::kernels {

// An open shared library; closed when the registry goes (at exit), after which no function
// pointer it registered is used.
struct KernelRegistry::Library {
  std::string path;
  void* handle = nullptr;
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
};

namespace {

// What a library's register function talks to. It only collects: the registry takes the
// implementations once the whole library has registered without error, so that a failed load
// leaves no pointer into a library that is then closed.
class LibraryRegistrar : public KernelRegistrar {
 public:
  explicit LibraryRegistrar(std::string origin) : origin_(std::move(origin)) {}
  void add(const char* name, OpFunction fn, SupportsFn supports, const char* description) override {
    Implementation impl;
    impl.name = name != nullptr ? name : "";
    impl.origin = origin_;
    impl.description = description != nullptr ? description : "";
    impl.fn = fn;
    impl.supports_fn = supports;
    collected.push_back(std::move(impl));
  }
  std::vector<Implementation> collected;

 private:
  std::string origin_;
};

std::vector<std::string> all_op_names() {
  std::vector<std::string> names;
  for (std::string_view n : kOpNames) names.emplace_back(n);
  return names;
}

}  // namespace

KernelRegistry::KernelRegistry() : by_op_(kNumOps) { register_builtin_kernels(*this); }

KernelRegistry::~KernelRegistry() {
  // Implementations of a library must go before the library itself.
  by_op_.clear();
  libraries_.clear();
}

void KernelRegistry::add(Implementation impl) {
  check_new(impl);
  by_op_[static_cast<size_t>(impl.op())].push_back(std::move(impl));
}

void KernelRegistry::check_new(const Implementation& impl) const {
  const std::string op(op_name(impl.op()));
  TITAN_CHECK(!impl.name.empty(), impl.origin, ": an implementation of ", op, " has no name");
  TITAN_CHECK(impl.name.find_first_of("=@, ") == std::string::npos, impl.origin,
              ": implementation name '", impl.name, "' of ", op,
              " may not contain '=', '@', ',' or spaces");
  for (const Implementation& existing : by_op_[static_cast<size_t>(impl.op())]) {
    TITAN_CHECK(existing.name != impl.name, impl.origin, ": ", op, " implementation '", impl.name,
                "' is already registered by ", existing.origin);
  }
}

const Implementation& KernelRegistry::default_for(Op op, at::DeviceType device,
                                                  at::ScalarType dtype) const {
  for (const Implementation& impl : by_op_[static_cast<size_t>(op)])
    if (impl.is_default(device, dtype)) return impl;
  return get(op, "reference");
}

bool KernelRegistry::has(Op op, const std::string& name) const {
  for (const Implementation& impl : by_op_[static_cast<size_t>(op)])
    if (impl.name == name) return true;
  return false;
}

const Implementation& KernelRegistry::get(Op op, const std::string& name) const {
  for (const Implementation& impl : by_op_[static_cast<size_t>(op)])
    if (impl.name == name) return impl;
  fail("unknown ", op_name(op), " implementation '", name, "'; known: ", join(names(op)),
       " (more come from override.libraries)");
}

std::vector<std::string> KernelRegistry::names(Op op) const {
  std::vector<std::string> out;
  for (const Implementation& impl : by_op_[static_cast<size_t>(op)]) out.push_back(impl.name);
  return out;
}

void KernelRegistry::load_library(const std::string& path) {
  TITAN_CHECK(std::filesystem::exists(path), "override.libraries: ", path, ": no such file");
  const std::string canonical = std::filesystem::canonical(path).string();
  for (const auto& lib : libraries_)
    if (lib->path == canonical) return;
  auto lib = std::make_unique<Library>();
  lib->path = canonical;
  lib->handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == nullptr) {
    const char* why = dlerror();
    fail("override.libraries: cannot load ", path, ": ", why != nullptr ? why : "dlopen failed");
  }
  auto symbol = [&](const char* name) {
    void* p = dlsym(lib->handle, name);
    TITAN_CHECK(p != nullptr, "override.libraries: ", path, " is not a titan kernel library (no ",
                name, "; define its entry points with TITAN_KERNEL_LIBRARY)");
    return p;
  };
  auto abi_version = reinterpret_cast<uint32_t (*)()>(symbol(TITAN_KERNEL_ABI_VERSION_SYMBOL));
  auto torch_version =
      reinterpret_cast<const char* (*)()>(symbol(TITAN_KERNEL_TORCH_VERSION_SYMBOL));
  auto register_kernels =
      reinterpret_cast<void (*)(KernelRegistrar*)>(symbol(TITAN_REGISTER_KERNELS_SYMBOL));
  const uint32_t version = abi_version();
  TITAN_CHECK(version == kKernelAbiVersion, "override.libraries: ", path,
              " was built against kernel ABI version ", version, " but this titan has version ",
              kKernelAbiVersion, "; rebuild the library against this titan's plugin_api.h");
  const std::string torch = torch_version() != nullptr ? torch_version() : "";
  TITAN_CHECK(torch == TORCH_VERSION, "override.libraries: ", path, " was built against torch ",
              torch, " but this titan uses torch ", TORCH_VERSION, "; rebuild the library");
  LibraryRegistrar registrar(path);
  try {
    register_kernels(&registrar);
  } catch (const std::exception& e) {
    fail("override.libraries: ", path, " failed while registering its kernels: ", e.what());
  }
  for (size_t i = 0; i < registrar.collected.size(); ++i) {
    check_new(registrar.collected[i]);
    for (size_t j = 0; j < i; ++j) {
      const Implementation& a = registrar.collected[i];
      const Implementation& b = registrar.collected[j];
      TITAN_CHECK(a.op() != b.op() || a.name != b.name, path, " registers ", op_name(a.op()),
                  " implementation '", a.name, "' twice");
    }
  }
  for (Implementation& impl : registrar.collected)
    by_op_[static_cast<size_t>(impl.op())].push_back(std::move(impl));
  libraries_.push_back(std::move(lib));
}

KernelRegistry& kernel_registry() {
  static KernelRegistry registry;
  return registry;
}

Op op_from_name(const std::string& name, const std::string& where) {
  for (size_t i = 0; i < kNumOps; ++i)
    if (kOpNames[i] == name) return static_cast<Op>(i);
  fail(where, ": unknown op '", name, "'; overridable ops: ", join(all_op_names()));
}

}  // namespace titan::kernels
