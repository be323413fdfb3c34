// One optimizer step over the same tensors, three ways: titan's fused AdamW8bit kernel
// (kernels/adamw8bit.h), the reference AdamW8bit (bitsandbytes' sequence of ATen ops, in C++)
// and titan's fused float32 AdamW (at::_fused_adamw_, optimizer.implementation fused). Prints
// one JSON line per implementation: {"impl", "numel", "threads", "min_s", "median_s", "cpu_s"}
// (wall seconds per step, and the least CPU time of the process per step: steadier than the
// wall time on a busy machine).
// bench/adamw8bit_step.py runs it next to bitsandbytes' own CPU step.
//
//   titan_optimizer_step_bench [--numel N] [--tensors K] [--reps R] [--impls a,b,c]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "titan/kernels/adamw8bit.h"

namespace {

using titan::kernels::AdamStepScalars;
using titan::kernels::BlockwiseQuantized;

struct Tensors {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  std::vector<BlockwiseQuantized> m8, v8;
};

Tensors make(int64_t numel, int64_t count) {
  Tensors t;
  at::manual_seed(0);
  const int64_t each = numel / count;
  for (int64_t i = 0; i < count; ++i) {
    t.params.push_back(at::randn({each}) * 0.02);
    t.grads.push_back(at::randn({each}) * 1e-3);
    t.exp_avgs.push_back(at::zeros({each}));
    t.exp_avg_sqs.push_back(at::zeros({each}));
    t.steps.push_back(at::zeros({}));
    const int64_t blocks = titan::kernels::quant_blocks(each);
    t.m8.push_back({at::zeros({each}, at::kByte), at::zeros({blocks})});
    t.v8.push_back({at::zeros({each}, at::kByte), at::zeros({blocks})});
  }
  return t;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Times {
  std::vector<double> wall, cpu;
};

void report(const std::string& impl, int64_t numel, Times t) {
  std::sort(t.wall.begin(), t.wall.end());
  std::sort(t.cpu.begin(), t.cpu.end());
  std::printf(
      "{\"impl\": \"%s\", \"numel\": %lld, \"threads\": %d, \"min_s\": %.6f, \"median_s\": "
      "%.6f, \"cpu_s\": %.6f}\n",
      impl.c_str(), static_cast<long long>(numel), at::get_num_threads(), t.wall.front(),
      t.wall[t.wall.size() / 2], t.cpu.front());
  std::fflush(stdout);
}

Times time_steps(int reps, const std::function<void(int64_t)>& step) {
  Times out;
  for (int r = 0; r <= reps; ++r) {  // the first is a warm-up
    const auto start = std::chrono::steady_clock::now();
    const double cpu = cpu_seconds();
    step(r + 1);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) {
      out.wall.push_back(s);
      out.cpu.push_back(cpu_seconds() - cpu);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t numel = 50'000'000, count = 8;
  int reps = 5;
  std::string impls = "fused8bit,reference8bit,fused32";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--numel")
      numel = std::stoll(value);
    else if (flag == "--tensors")
      count = std::stoll(value);
    else if (flag == "--reps")
      reps = std::stoi(value);
    else if (flag == "--impls")
      impls = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  at::NoGradGuard no_grad;
  std::stringstream list(impls);
  for (std::string impl; std::getline(list, impl, ',');) {
    Tensors t = make(numel, count);
    AdamStepScalars s;
    s.lr = 1e-3;
    s.beta1 = 0.9;
    s.beta2 = 0.95;
    s.weight_decay = 0.1;
    std::function<void(int64_t)> step;
    if (impl == "fused8bit" || impl == "reference8bit") {
      const bool fused = impl == "fused8bit";
      step = [&, fused](int64_t k) {
        s.step = k;
        for (size_t i = 0; i < t.params.size(); ++i)
          (fused ? titan::kernels::adamw8bit_step_fused : titan::kernels::adamw8bit_step_reference)(
              t.params[i], t.grads[i], t.m8[i], t.v8[i], s);
      };
    } else if (impl == "fused32") {
      step = [&](int64_t) {
        at::_foreach_add_(t.steps, 1);
        at::_fused_adamw_(t.params, t.grads, t.exp_avgs, t.exp_avg_sqs, {}, t.steps, s.lr, s.beta1,
                          s.beta2, s.weight_decay, s.eps, false, false);
      };
    } else {
      std::fprintf(stderr, "unknown implementation %s\n", impl.c_str());
      return 2;
    }
    report(impl, numel, time_steps(reps, step));
  }
  return 0;
}
