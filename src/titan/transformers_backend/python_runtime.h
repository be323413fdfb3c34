// The embedded CPython of the Transformers backend: started once, on first use, as the
// project's venv interpreter (so `import torch, transformers` finds the pinned packages), and
// left with the GIL released. Code that calls Python takes the GIL for exactly that call
// (pybind11::gil_scoped_acquire). Nothing here runs unless model.name is "transformers".
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace titan::transformers_backend {

// Starts the interpreter and imports torch and transformers; throws titan::Error naming the
// interpreter when that fails (for example when transformers is not installed there).
void ensure_python();

// The interpreter used: $TITAN_PYTHON when set, else the one titan was built against.
std::string python_executable();

// A Python exception as one line of text ("ValueError: ..."), for error messages.
std::string describe(const pybind11::error_already_set& error);

}  // namespace titan::transformers_backend
