#include "titan/transformers_backend/transformers_parallel.h"

#include <torch/csrc/utils/pybind.h>

#include <map>
#include <set>

#include "titan/common/error.h"
#include "titan/common/placement.h"
#include "titan/transformers_backend/python_runtime.h"

namespace py = pybind11;

namespace titan::transformers_backend {
namespace {

// A differentiable collective as a Python callable; it lets go of the GIL while it waits for the
// other ranks.
py::cpp_function as_python(models::TensorParallelHooks::Fn fn) {
  return py::cpp_function([fn](const at::Tensor& x) {
    py::gil_scoped_release release;
    return fn(x);
  });
}

py::object module(const char* name) { return py::module_::import(name); }

}  // namespace

void apply_tensor_parallel(TransformersModel& model, const config::TrainerConfig& config,
                           models::ParallelContext& parallel) {
  const int64_t T = parallel.degree("tp");
  if (T == 1) return;
  const bool sp = config.parallelism.enable_sequence_parallel;
  TITAN_CHECK(!sp || config.training.seq_len % T == 0,
              "training.seq_len = ", config.training.seq_len,
              ": with sequence parallelism (parallelism.enable_sequence_parallel) "
              "parallelism.tensor_parallel_degree = ",
              T, " must divide it");
  const NamedTensors params = model.named_parameters();
  const std::string output = model.output_name();
  const int64_t vocab = model.output_weight().size(0);
  const EvenSplit rows = even_split(vocab, T, parallel.coordinate("tp"));
  // The sums inside the regions (and the vocabulary-parallel lookup) are always plain; under
  // sequence parallelism the regions' edges gather and scatter the sequence instead.
  const models::TensorParallelHooks hooks = parallel.tensor_parallel_hooks(false);
  const models::TensorParallelHooks sequence =
      sp ? parallel.tensor_parallel_hooks(true) : models::TensorParallelHooks();
  std::map<std::string, std::pair<std::string, int64_t>> roles;
  {
    py::gil_scoped_acquire gil;
    py::list names, sizes;
    for (const auto& [name, tensor] : params) {
      names.append(name);
      sizes.append(py::cast(tensor.sizes().vec()));
    }
    try {
      py::object tp = module("titan_tp_plan");
      const py::list found = tp.attr("roles")(model.python_model(), names, sizes, output, T, sp);
      for (size_t i = 0; i < params.size(); ++i) {
        const py::tuple r = found[i].cast<py::tuple>();
        roles[params[i].first] = {r[0].cast<std::string>(), r[1].cast<int64_t>()};
      }
      // (split_tokens splits dim 0: the Python side puts the sequence there.)
      const py::object on_sequence =
          sp ? py::make_tuple(as_python(sequence.enter), as_python(sequence.exit),
                              as_python(hooks.split_tokens))
             : py::object(py::none());
      tp.attr("install")(model.python_model(), T, parallel.coordinate("tp"), as_python(hooks.enter),
                         as_python(hooks.exit), rows.begin, rows.real, on_sequence);
    } catch (const py::error_already_set& e) {
      fail(describe(e));
    }
  }
  for (models::Module* m : model.modules()) {
    m->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      const auto& [role, dim] = roles.at(name);
      if (role == "column" || role == "row" || role == "vocabulary") {
        parallel.distribute(name, slot, "tp", dim);
      } else if (role == "partial") {
        parallel.sum_gradients_over(name, "tp");
      }
    });
  }
  parallel.use_vocab_parallel_head(vocab, sp);
}

std::vector<std::string> apply_expert_parallel(TransformersModel& model,
                                               models::ParallelContext& parallel) {
  const int64_t E = parallel.degree("ep");
  if (E == 1) return {};
  std::vector<std::string> stacks;
  const kernels::ExpertGroup group = parallel.expert_group();
  {
    py::gil_scoped_acquire gil;
    py::list names;
    for (const auto& [name, _] : model.named_parameters()) names.append(name);
    try {
      py::object experts = module("titan_experts");
      stacks = experts.attr("expert_stacks")(model.python_model(), names, E)
                   .cast<std::vector<std::string>>();
      py::cpp_function all_to_all(
          [group](const at::Tensor& rows, std::vector<int64_t> receive, std::vector<int64_t> send) {
            py::gil_scoped_release release;
            return group.all_to_all(rows, receive, send);
          });
      py::cpp_function exchange([group](const at::Tensor& counts) {
        py::gil_scoped_release release;
        return group.exchange_counts(counts);
      });
      experts.attr("install")(model.python_model(), E, group.rank, all_to_all, exchange);
    } catch (const py::error_already_set& e) {
      fail(describe(e));
    }
  }
  const std::set<std::string> split(stacks.begin(), stacks.end());
  for (models::Module* m : model.modules())
    m->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      if (split.count(name)) parallel.distribute(name, slot, "ep", 0);
    });
  return stacks;
}

}  // namespace titan::transformers_backend
