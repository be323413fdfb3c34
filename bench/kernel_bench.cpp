// Kernel benchmark: every non-reference implementation of rms_norm, moe_experts, rope, swiglu
// and cross_entropy against `reference` in the same process, forward + backward, at the
// debug-model size, a small size and one Qwen3-30B-A3B layer, on the CPU and (where present)
// on CUDA. Prints a markdown table: median milliseconds per forward+backward and the ratio.
//
//   titan_kernel_bench [--device cpu|cuda] [--sizes debug,small,30b-a3b] [--dtype float32|bfloat16]
//                      [--ops rms_norm,moe_experts,...] [--reps N] [--no-reference]
//                      [--impl NAME]
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

double elapsed_ms(const std::function<void()>& run, const at::Device& device) {
  synchronize(device);
  const auto start = std::chrono::steady_clock::now();
  run();
  synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of each run (a forward + backward) after two warm-ups, the two timed in
// turn, in alternating order (ABBA), so that a change of machine load or of the memory system's
// state (fresh pages after the other run freed its buffers) affects both alike.
std::pair<double, double> paired_median_ms(const std::function<void()>& a,
                                           const std::function<void()>& b, const at::Device& device,
                                           int reps) {
  std::vector<double> ta, tb;
  for (int i = 0; i < reps + 2; ++i) {
    double x = 0, y = 0;
    if (i % 2 == 0 || !b) {
      x = elapsed_ms(a, device);
      if (b) y = elapsed_ms(b, device);
    } else {
      y = elapsed_ms(b, device);
      x = elapsed_ms(a, device);
    }
    if (i < 2) continue;
    ta.push_back(x);
    tb.push_back(y);
  }
  return {median(ta), b ? median(tb) : -1};
}

at::Tensor leaf(at::Tensor t) { return t.detach().requires_grad_(true); }

// The inputs of `op` at `size`, made once and shared by every implementation timed on them
// (at the Qwen3-30B-A3B size the expert weights alone are 2.4 GB in float32).
std::vector<at::Tensor> inputs_for(Op op, const Size& s, at::ScalarType dtype,
                                   const at::Device& device) {
  const auto act = at::TensorOptions().device(device).dtype(dtype);
  const auto master = at::TensorOptions().device(device).dtype(at::kFloat);
  switch (op) {
    case Op::kRmsNorm:
      return {leaf(at::randn({s.tokens, s.hidden}, act)), leaf(at::ones({s.hidden}, master)),
              at::randn({s.tokens, s.hidden}, act)};
    case Op::kMoeExperts:
      return {leaf(at::randn({s.tokens, s.hidden}, act)),
              std::get<1>(at::topk(at::randn({s.tokens, s.experts}, master), s.top_k, -1)),
              leaf(at::softmax(at::randn({s.tokens, s.top_k}, master), -1).to(dtype)),
              leaf(at::randn({s.experts, 2 * s.moe_inter, s.hidden}, master) * 0.02),
              leaf(at::randn({s.experts, s.hidden, s.moe_inter}, master) * 0.02),
              at::randn({s.tokens, s.hidden}, act)};
    case Op::kRope: {
      const int64_t batch = 4, seq = s.tokens / batch;
      const at::Tensor angle = at::randn({seq, s.head_dim / 2}, master);
      return {leaf(at::randn({batch, seq, s.heads, s.head_dim}, act)),
              leaf(at::randn({batch, seq, s.kv_heads, s.head_dim}, act)),
              at::cat({angle.cos(), angle.cos()}, -1).to(dtype),
              at::cat({angle.sin(), angle.sin()}, -1).to(dtype)};
    }
    case Op::kSwiglu:
      return {leaf(at::randn({s.tokens, s.hidden}, act)),
              leaf(at::randn({s.inter, s.hidden}, master) * 0.02),
              leaf(at::randn({s.inter, s.hidden}, master) * 0.02),
              leaf(at::randn({s.hidden, s.inter}, master) * 0.02),
              at::randn({s.tokens, s.hidden}, act)};
    case Op::kCrossEntropy: {
      const int64_t rows = std::min<int64_t>(s.tokens, device.is_cuda() ? 8192 : 256);
      return {leaf(at::randn({rows, s.hidden}, act)),
              leaf(at::randn({s.vocab, s.hidden}, master) * 0.02),
              at::randint(0, s.vocab, {rows}, master.dtype(at::kLong))};
    }
    default:
      return {};
  }
}

// A forward + backward of one implementation of `op` on `in` (inputs_for), ready to be timed.
// The leaves' gradients are dropped after each run, as zero_grad does in training.
std::function<void()> workload(Op op, const Implementation& impl, std::vector<at::Tensor> in) {
  std::function<void()> run;
  switch (op) {
    case Op::kRmsNorm: {
      auto fn = std::get<RmsNormFn>(impl.fn);
      run = [=] { fn(in[0], in[1], 1e-6).backward(in[2]); };
      break;
    }
    case Op::kMoeExperts: {
      auto fn = std::get<MoeExpertsFn>(impl.fn);
      Routing r;
      r.top_experts = in[1];
      r.top_weights = in[2];
      run = [=] { fn(in[0], r, in[3], in[4]).backward(in[5]); };
      break;
    }
    case Op::kRope: {
      auto fn = std::get<RopeFn>(impl.fn);
      run = [=] {
        const RotatedQueryKey out = fn(in[0].transpose(1, 2), in[1].transpose(1, 2), in[2], in[3]);
        (out.q.sum() + out.k.sum()).backward();
      };
      break;
    }
    case Op::kSwiglu: {
      auto fn = std::get<SwigluFn>(impl.fn);
      run = [=] { fn(in[0], in[1], in[2], in[3]).backward(in[4]); };
      break;
    }
    case Op::kCrossEntropy: {
      auto fn = std::get<CrossEntropyFn>(impl.fn);
      run = [=] { fn(in[0], in[1], in[2], -100).backward(); };
      break;
    }
    default:
      return {};
  }
  return [run, in] {
    run();
    for (const at::Tensor& t : in)
      if (t.requires_grad()) const_cast<at::Tensor&>(t).mutable_grad().reset();
  };
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
  std::string only;            // --impl NAME: time only that implementation (may be reference)
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
    else if (flag == "--impl")
      only = value;
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
      std::vector<at::Tensor> inputs;  // made when the first implementation needs them
      for (const std::string& name : registry.names(op)) {
        const Implementation& impl = registry.get(op, name);
        if (!only.empty() ? name != only
                          : name == "reference" || !impl.supports(device.type(), dtype))
          continue;
        double reference_ms = -1;
        if (inputs.empty()) inputs = inputs_for(op, size, dtype, device);
        std::function<void()> reference_run;
        if (time_reference) reference_run = workload(op, reference, inputs);
        double ms = 0;
        std::tie(ms, reference_ms) =
            paired_median_ms(workload(op, impl, inputs), reference_run, device, reps);
        std::cout << "| " << op_name(op) << " | " << size.name << " | " << device_name << " | "
                  << dtype_name << " | " << name << " | " << fixed(ms, 3) << " | "
                  << fixed(reference_ms, 3) << " | " << fixed(reference_ms / ms, 2) << "x |"
                  << std::endl;
      }
    }
  }
  return 0;
}
