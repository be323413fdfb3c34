#include "titan/transformers_backend/context_parallel.h"

#include <torch/csrc/utils/pybind.h>

#include "titan/common/error.h"
#include "titan/kernels/registry.h"
#include "titan/transformers_backend/python_modules.h"
#include "titan/transformers_backend/python_runtime.h"

namespace py = pybind11;

namespace titan::transformers_backend {

void apply_context_parallel(TransformersModel& model, models::ParallelContext& parallel,
                            int64_t seq_len) {
  const models::ContextParallelAttention cp = parallel.context_parallel_attention();
  TITAN_CHECK(static_cast<bool>(cp), "context parallelism: no context parallel attention");
  const kernels::Implementation& impl = kernels::kernel_registry().default_for(
      kernels::Op::kContextAttention, model.output_weight().device().type(), model.compute_dtype());
  const auto kernel = std::get<kernels::ContextAttentionFn>(impl.fn);
  py::gil_scoped_acquire gil;
  py::cpp_function attend([cp, kernel](const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, double scale, py::object ids) {
    const at::Tensor documents = ids.is_none() ? at::Tensor() : ids.cast<at::Tensor>();
    // The collectives (and their autograd nodes) need no Python.
    py::gil_scoped_release release;
    return cp(kernel, q, k, v, scale, documents);
  });
  try {
    python_module("context_attention").attr("install")(model.python_model(), attend, seq_len);
  } catch (const py::error_already_set& e) {
    fail("parallelism.context_parallel_degree = ", parallel.degree("cp"),
         ": the Transformers backend cannot run this model under context parallelism: ",
         describe(e));
  }
  model.pass_document_ids();
}

}  // namespace titan::transformers_backend
