// The "transformers" model spec as titan's registry holds it: a stand-in that loads the
// backend's shared library (libtitan_transformers.so, which embeds CPython) the first time it
// is used, and forwards to the spec the library provides. Titan itself never links Python, so
// `titan --help` and the native paths work where that Python is missing.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

ModelSpec transformers_backend_spec();

}  // namespace titan::models
