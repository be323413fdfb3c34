// The backend's Python modules beside helper.py, compiled in: context_attention.py (context
// parallelism's attention function), stages.py (pipeline stages) and generation.py (decoding
// with Transformers' KV cache). Each is executed once, on
// first use, as a module of its own.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace titan::transformers_backend {

// The module of `name` ("stages" for titan_stages); the GIL must be held. Throws titan::Error
// naming a module that is not there.
pybind11::object python_module(const std::string& name);

}  // namespace titan::transformers_backend
