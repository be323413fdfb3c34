// Kernel benchmark: every non-reference implementation of rms_norm, moe_experts, rope, swiglu
// and cross_entropy against `reference` in the same process, forward + backward, at the
// debug-model size, a small size and one Qwen3-30B-A3B layer, on the CPU and (where present)
// on CUDA. Prints a markdown table: median milliseconds per forward+backward and the ratio.
//
//   titan_kernel_bench [--device cpu|cuda] [--sizes debug,small,30b-a3b] [--dtype float32|bfloat16]
//                      [--ops rms_norm,moe_experts,...] [--reps N] [--no-reference]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "titan/kernels/registry.h"

namespace {

using namespace titan::kernels;

struct Size {
  std::string name;
  int64_t tokens, hidden, experts, top_k, moe_inter, inter, heads, kv_heads, head_dim, vocab;
};

// debug: the debugmodel_moe flavor at 4 x 256 tokens; 30b-a3b: one layer of Qwen3-30B-A3B
// (512 tokens on the CPU, 8192 on CUDA; the vocabulary of the real model).
std::vector<Size> sizes_for(const std::string& list, bool cuda) {
  const std::vector<Size> all = {
      {"debug", 1024, 256, 8, 2, 256, 768, 8, 4, 64, 151936},
      {"small", 1024, 512, 16, 4, 256, 1536, 8, 4, 64, 32768},
      {"30b-a3b", cuda ? 8192 : 512, 2048, 128, 8, 768, 6144, 32, 4, 128, 151936},
  };
  std::vector<Size> out;
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Size& s) { return s.name == name; });
    if (it == all.end()) throw std::runtime_error("unknown size '" + name + "'");
    out.push_back(*it);
  }
  return out;
}

void synchronize(const at::Device& device) {
  if (device.is_cuda()) at::zeros({1}, at::TensorOptions().device(device)).item<float>();
}

// Median milliseconds of `run` (a forward + backward), after two warm-up runs.
double median_ms(const std::function<void()>& run, const at::Device& device, int reps) {
  std::vector<double> times;
  for (int i = 0; i < reps + 2; ++i) {
    synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    run();
    synchronize(device);
    const auto end = std::chrono::steady_clock::now();
    if (i >= 2) times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

at::Tensor leaf(at::Tensor t) { return t.detach().requires_grad_(true); }

// A forward + backward of one implementation of `op` at `size`, ready to be timed.
std::function<void()> workload(Op op, const Implementation& impl, const Size& s,
                               at::ScalarType dtype, const at::Device& device) {
  const auto act = at::TensorOptions().device(device).dtype(dtype);
  const auto master = at::TensorOptions().device(device).dtype(at::kFloat);
  switch (op) {
    case Op::kRmsNorm: {
      auto fn = std::get<RmsNormFn>(impl.fn);
      at::Tensor x = leaf(at::randn({s.tokens, s.hidden}, act)),
                 w = leaf(at::ones({s.hidden}, master));
      at::Tensor g = at::randn({s.tokens, s.hidden}, act);
      return [=] { fn(x, w, 1e-6).backward(g); };
    }
    case Op::kMoeExperts: {
      auto fn = std::get<MoeExpertsFn>(impl.fn);
      at::Tensor x = leaf(at::randn({s.tokens, s.hidden}, act));
      Routing r;
      r.top_experts = std::get<1>(at::topk(at::randn({s.tokens, s.experts}, master), s.top_k, -1));
      r.top_weights = leaf(at::softmax(at::randn({s.tokens, s.top_k}, master), -1).to(dtype));
      at::Tensor gate_up = leaf(at::randn({s.experts, 2 * s.moe_inter, s.hidden}, master) * 0.02);
      at::Tensor down = leaf(at::randn({s.experts, s.hidden, s.moe_inter}, master) * 0.02);
      at::Tensor g = at::randn({s.tokens, s.hidden}, act);
      return [=] { fn(x, r, gate_up, down).backward(g); };
    }
    case Op::kRope: {
      auto fn = std::get<RopeFn>(impl.fn);
      const int64_t batch = 4, seq = s.tokens / batch;
      at::Tensor q = leaf(at::randn({batch, seq, s.heads, s.head_dim}, act));
      at::Tensor k = leaf(at::randn({batch, seq, s.kv_heads, s.head_dim}, act));
      at::Tensor angle = at::randn({seq, s.head_dim / 2}, master);
      at::Tensor cos = at::cat({angle.cos(), angle.cos()}, -1).to(dtype);
      at::Tensor sin = at::cat({angle.sin(), angle.sin()}, -1).to(dtype);
      return [=] {
        const RotatedQueryKey out = fn(q.transpose(1, 2), k.transpose(1, 2), cos, sin);
        (out.q.sum() + out.k.sum()).backward();
      };
    }
    case Op::kSwiglu: {
      auto fn = std::get<SwigluFn>(impl.fn);
      at::Tensor x = leaf(at::randn({s.tokens, s.hidden}, act));
      at::Tensor gate = leaf(at::randn({s.inter, s.hidden}, master) * 0.02);
      at::Tensor up = leaf(at::randn({s.inter, s.hidden}, master) * 0.02);
      at::Tensor down = leaf(at::randn({s.hidden, s.inter}, master) * 0.02);
      at::Tensor g = at::randn({s.tokens, s.hidden}, act);
      return [=] { fn(x, gate, up, down).backward(g); };
    }
    case Op::kCrossEntropy: {
      auto fn = std::get<CrossEntropyFn>(impl.fn);
      const int64_t rows = std::min<int64_t>(s.tokens, device.is_cuda() ? 8192 : 256);
      at::Tensor h = leaf(at::randn({rows, s.hidden}, act));
      at::Tensor w = leaf(at::randn({s.vocab, s.hidden}, master) * 0.02);
      at::Tensor labels = at::randint(0, s.vocab, {rows}, master.dtype(at::kLong));
      return [=] { fn(h, w, labels, -100).backward(); };
    }
    default:
      return {};
  }
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu", size_list = "debug,small,30b-a3b", dtype_name = "float32";
  std::string op_list = "rms_norm,moe_experts,rope,swiglu,cross_entropy";
  bool time_reference = true;  // --no-reference: for profiling one implementation alone
  int reps = 5;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--no-reference") {
      time_reference = false;
      --i;
      continue;
    }
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--device")
      device_name = value;
    else if (flag == "--sizes")
      size_list = value;
    else if (flag == "--dtype")
      dtype_name = value;
    else if (flag == "--reps")
      reps = std::stoi(value);
    else if (flag == "--ops")
      op_list = value;
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  const at::Device device(device_name == "cuda" ? at::kCUDA : at::kCPU);
  const at::ScalarType dtype = dtype_name == "bfloat16" ? at::kBFloat16 : at::kFloat;
  if (device.is_cuda() && !at::hasCUDA()) {
    std::cerr << "no CUDA device (or a build without TITAN_CUDA)\n";
    return 1;
  }
  at::manual_seed(0);
  const KernelRegistry& registry = kernel_registry();
  std::cout << "| op | size | device | dtype | implementation | ms (fwd+bwd) | reference ms | "
               "speed-up |\n"
            << "|---|---|---|---|---|---|---|---|\n";
  for (const Size& size : sizes_for(size_list, device.is_cuda())) {
    std::stringstream ops(op_list);
    for (std::string op_text; std::getline(ops, op_text, ',');) {
      const Op op = op_from_name(op_text, "--ops");
      const Implementation& reference = registry.get(op, "reference");
      double reference_ms = -1;
      for (const std::string& name : registry.names(op)) {
        const Implementation& impl = registry.get(op, name);
        if (name == "reference" || !impl.supports(device.type(), dtype)) continue;
        if (reference_ms < 0 && time_reference)
          reference_ms = median_ms(workload(op, reference, size, dtype, device), device, reps);
        const double ms = median_ms(workload(op, impl, size, dtype, device), device, reps);
        std::cout << "| " << op_name(op) << " | " << size.name << " | " << device_name << " | "
                  << dtype_name << " | " << name << " | " << fixed(ms, 3) << " | "
                  << fixed(reference_ms, 3) << " | " << fixed(reference_ms / ms, 2) << "x |"
                  << std::endl;
      }
    }
  }
  return 0;
}
