#include "titan/transformers_backend/python_runtime.h"

#include <pybind11/embed.h>

#include <cstdlib>
#include <mutex>

#include "titan/common/error.h"

namespace py = pybind11;

namespace titan::transformers_backend {
namespace {

std::once_flag started;
std::string start_error;

void start() {
  const std::string exe = python_executable();
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  // The venv's interpreter: its pyvenv.cfg puts the venv's site-packages on sys.path.
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, exe.c_str());
  if (!PyStatus_Exception(status))
    status = PyConfig_SetBytesString(&config, &config.executable, exe.c_str());
  config.install_signal_handlers = 0;  // titan's handlers, not Python's
  config.parse_argv = 0;
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    start_error = "cannot start the Python interpreter " + exe + ": " +
                  (status.err_msg != nullptr ? status.err_msg : "unknown error");
    return;
  }
  try {
    py::module_::import("torch");
    py::module_::import("transformers");
  } catch (const py::error_already_set& e) {
    start_error = "the Transformers backend needs torch and transformers in " + exe +
                  ", which cannot import them: " + describe(e);
  }
  // Python runs only inside explicit GIL scopes from now on.
  PyEval_SaveThread();
}

}  // namespace

std::string python_executable() {
  const char* env = std::getenv("TITAN_PYTHON");
  if (env != nullptr && *env != '\0') return env;
  return TITAN_PYTHON_EXECUTABLE;
}

void ensure_python() {
  std::call_once(started, start);
  TITAN_CHECK(start_error.empty(), start_error);
}

std::string describe(const py::error_already_set& e) {
  py::gil_scoped_acquire gil;
  std::string type = "Error";
  try {
    type = py::str(e.type().attr("__name__"));
  } catch (...) {
  }
  std::string text = py::str(e.value());
  for (char& c : text)
    if (c == '\n') c = ' ';
  return type + ": " + text;
}

}  // namespace titan::transformers_backend
