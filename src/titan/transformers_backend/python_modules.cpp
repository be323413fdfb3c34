#include "titan/transformers_backend/python_modules.h"

#include "titan/common/error.h"

namespace py = pybind11;

namespace titan::transformers_backend {

py::object python_module(const std::string& name) {
  // helper_module() (transformers_spec.cpp) installed the backend's modules in sys.modules
  // (modules_py.h) before any model was built.
  const py::dict installed = py::module_::import("sys").attr("modules");
  const std::string key = "titan_" + name;
  TITAN_CHECK(installed.contains(key.c_str()), "the Transformers backend has no Python module ",
              key);
  return installed[key.c_str()];
}

}  // namespace titan::transformers_backend
