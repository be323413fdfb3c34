// GEMM ceiling: this machine's matrix-multiply throughput at the projection shapes of
// Qwen3-0.6B, -4B and -8B, in float32 and bfloat16, through oneDNN (the library titan's CPU GEMMs
// use: kernels/cpu/gemm.h for float32, ATen's bfloat16 at::mm) and MKL (cblas_sgemm and
// cblas_gemm_bf16bf16f32, which ATen's float32 at::mm and bitsandbytes' dequantise-then-matmul
// reach), for M = 128 and 512 tokens. Every product is a projection's forward, y[M, N] =
// x[M, K] W[N, K]^T, with a weight the library has not seen packed before (as in training, where
// it changes every step, or is dequantised from NF4 per call): the time includes the weight's
// reorder into the library's blocked layout.
//
// Prints, per model, per dtype and M, each library's GFLOP/s per projection and over the layer
// (the seven projections' FLOPs over their summed times), and the best library's layer figure:
// the ceiling that bench/memory_at_scale.py divides each row's achieved FLOP/s by (a CPU "MFU").
// With --json PATH it also writes those layer ceilings. With --nf4, also titan's NF4 products
// (QLoRA's frozen projections, bfloat16) at the same shapes: the AMX kernels (where the CPU has
// AMX) and the tiled dequantise-then-oneDNN path, forward (y = x W^T) and backward (dx = dy W).
//
//   titan_gemm_ceiling [--models 0.6B,1.7B,4B,8B] [--tokens 128,512] [--seconds 0.3] [--json PATH]
//                      [--nf4]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/nf4_amx.h"
#include "titan/kernels/nf4.h"
#include "titan/kernels/nf4_matmul.h"

// ATen's oneDNN matmul (exported from libtorch_cpu; see kernels/cpu/gemm.cpp).
namespace at::native {
TORCH_API void mkldnn_matmul(const at::Tensor& mat1, const at::Tensor& mat2,
                             const at::Tensor& result, float beta, float alpha);
}  // namespace at::native

// MKL, linked statically into libtorch_cpu, which exports its Fortran sgemm (column-major, the
// one ATen calls) and CBLAS's bfloat16 GEMM.
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc);
void cblas_gemm_bf16bf16f32(int layout, int transa, int transb, int m, int n, int k, float alpha,
                            const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta,
                            float* c, int ldc);
}

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS enum values

struct Projection {
  std::string name;
  int64_t in, out;
};

struct Model {
  std::string name;
  int64_t hidden, inter, heads, kv_heads;
  std::vector<Projection> projections() const {
    const int64_t q = heads * 128, kv = kv_heads * 128;  // head_dim 128 in all three
    return {{"q", hidden, q},       {"k", hidden, kv},       {"v", hidden, kv},
            {"o", q, hidden},       {"gate", hidden, inter}, {"up", hidden, inter},
            {"down", inter, hidden}};
  }
};

// The published config.json values (as bench/memory_at_scale.py's SHAPES).
const std::vector<Model>& all_models() {
  static const std::vector<Model> models = {{"0.6B", 1024, 3072, 16, 8},
                                            {"1.7B", 2048, 6144, 16, 8},
                                            {"4B", 2560, 9728, 32, 8},
                                            {"8B", 4096, 12288, 32, 8}};
  return models;
}

struct Library {
  std::string name;
  at::ScalarType dtype;
  // y = x W^T for x [M, K], w [N, K] in `dtype`; y [M, N] (float32 for MKL's bfloat16 GEMM,
  // which writes float32).
  std::function<void(const at::Tensor& x, const at::Tensor& w, at::Tensor& y)> run;
  at::ScalarType out_dtype;
};

std::vector<Library> libraries() {
  return {
      {"oneDNN", at::kFloat,
       [](const at::Tensor& x, const at::Tensor& w, at::Tensor& y) {
         titan::kernels::cpu::gemm_out(x, w.t(), y);
       },
       at::kFloat},
      {"MKL", at::kFloat,
       [](const at::Tensor& x, const at::Tensor& w, at::Tensor& y) {
         const int m = static_cast<int>(x.size(0)), k = static_cast<int>(x.size(1)),
                   n = static_cast<int>(w.size(0));
         // Column-major: y^T [N, M] = W [N, K] (read as W^T, transposed) @ x^T [K, M], as
         // ATen's at::linear calls it.
         const float one = 1.0f, zero = 0.0f;
         sgemm_("T", "N", &n, &m, &k, &one, w.const_data_ptr<float>(), &k,
                x.const_data_ptr<float>(), &k, &zero, y.mutable_data_ptr<float>(), &n);
       },
       at::kFloat},
      {"oneDNN", at::kBFloat16,
       [](const at::Tensor& x, const at::Tensor& w, at::Tensor& y) {
         at::native::mkldnn_matmul(x, w.t(), y, 0.0f, 1.0f);
       },
       at::kBFloat16},
      {"MKL", at::kBFloat16,
       [](const at::Tensor& x, const at::Tensor& w, at::Tensor& y) {
         const int m = static_cast<int>(x.size(0)), k = static_cast<int>(x.size(1)),
                   n = static_cast<int>(w.size(0));
         cblas_gemm_bf16bf16f32(kRowMajor, kNoTrans, kTrans, m, n, k, 1.0f,
                                reinterpret_cast<const uint16_t*>(x.const_data_ptr<at::BFloat16>()),
                                k,
                                reinterpret_cast<const uint16_t*>(w.const_data_ptr<at::BFloat16>()),
                                k, 0.0f, y.mutable_data_ptr<float>(), n);
       },
       at::kFloat},
  };
}

double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The fastest of the calls made in `budget` seconds (at least 3, after one warm-up): on a
// machine shared with other work the least disturbed call is the nearest to the ceiling.
double best_seconds(const std::function<void()>& f, double budget) {
  f();
  double best = 1e30, spent = 0;
  for (int i = 0; i < 3 || spent < budget; ++i) {
    const double t = seconds_of(f);
    best = std::min(best, t);
    spent += t;
  }
  return best;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string s; std::getline(ss, s, ',');) out.push_back(s);
  return out;
}

const char* dtype_name(at::ScalarType t) { return t == at::kFloat ? "float32" : "bfloat16"; }

// GFLOP/s of titan's NF4 products per projection and over the layer.
void nf4_rows(const std::vector<Model>& models, const std::vector<int64_t>& tokens, double budget) {
  using namespace titan::kernels;
  struct Path {
    std::string name;
    std::function<void(const at::Tensor& x, const at::Tensor& dy, const Nf4Weight& w)> run;
    bool amx;
  };
  const std::vector<Path> paths = {
      {"AMX forward",
       [](const at::Tensor& x, const at::Tensor&, const Nf4Weight& w) {
         cpu::nf4_amx_forward(x, w);
       },
       true},
      {"AMX backward",
       [](const at::Tensor&, const at::Tensor& dy, const Nf4Weight& w) {
         cpu::nf4_amx_backward(dy, w);
       },
       true},
      {"tiled forward",
       [](const at::Tensor& x, const at::Tensor&, const Nf4Weight& w) {
         titan::kernels::detail::tiled_forward(x, w, &dequantize_nf4_rows_cpu, &cpu::gemm_out);
       },
       false},
      {"tiled backward",
       [](const at::Tensor&, const at::Tensor& dy, const Nf4Weight& w) {
         titan::kernels::detail::tiled_backward(dy, w, &dequantize_nf4_rows_cpu, &cpu::gemm_out);
       },
       false},
  };
  std::printf("\nNF4 products (bfloat16, blocks of 64), GFLOP/s (fastest call):\n\n");
  std::printf("| model | M | path |");
  for (const Projection& p : all_models()[0].projections()) std::printf(" %s |", p.name.c_str());
  std::printf(" layer |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Model& model : models) {
    std::vector<Nf4Weight> weights;
    for (const Projection& p : model.projections())
      weights.push_back(quantize_nf4(at::randn({p.out, p.in}) * 0.02));
    for (int64_t m : tokens) {
      for (const Path& path : paths) {
        if (path.amx && !cpu::nf4_amx_available()) continue;
        std::printf("| %s | %lld | %s |", model.name.c_str(), static_cast<long long>(m),
                    path.name.c_str());
        double flops = 0, seconds = 0;
        for (size_t i = 0; i < weights.size(); ++i) {
          const Nf4Weight& w = weights[i];
          const at::Tensor x = at::randn({m, w.cols}).to(at::kBFloat16);
          const at::Tensor dy = at::randn({m, w.rows}).to(at::kBFloat16);
          const double t = best_seconds([&] { path.run(x, dy, w); }, budget);
          const double f = 2.0 * static_cast<double>(m * w.rows * w.cols);
          flops += f;
          seconds += t;
          std::printf(" %.0f |", f / t / 1e9);
          std::fflush(stdout);
        }
        std::printf(" **%.0f** |\n", flops / seconds / 1e9);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string models_arg = "0.6B,4B,8B", tokens_arg = "128,512", json_path;
  double budget = 0.3;
  bool nf4 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--models")
      models_arg = value();
    else if (a == "--tokens")
      tokens_arg = value();
    else if (a == "--seconds")
      budget = std::stod(value());
    else if (a == "--json")
      json_path = value();
    else if (a == "--nf4")
      nf4 = true;
    else
      throw std::runtime_error("unknown argument '" + a +
                               "' (--models, --tokens, --seconds, --json, --nf4)");
  }
  std::vector<Model> models;
  for (const std::string& name : split(models_arg)) {
    auto it = std::find_if(all_models().begin(), all_models().end(),
                           [&](const Model& m) { return m.name == name; });
    if (it == all_models().end()) throw std::runtime_error("unknown model '" + name + "'");
    models.push_back(*it);
  }
  std::vector<int64_t> tokens;
  for (const std::string& t : split(tokens_arg)) tokens.push_back(std::stoll(t));

  at::manual_seed(0);
  std::printf("GEMM ceiling, %d threads: GFLOP/s of y = x W^T per projection (fastest call)\n\n",
              at::get_num_threads());
  std::printf("| model | dtype | M | library |");
  for (const Projection& p : all_models()[0].projections()) std::printf(" %s |", p.name.c_str());
  std::printf(" layer |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  // ceiling[model][dtype][M] = the best library's layer GFLOP/s
  std::map<std::string, std::map<std::string, std::map<int64_t, std::pair<double, std::string>>>>
      ceiling;
  for (const Model& model : models) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      for (int64_t m : tokens) {
        for (const Library& lib : libraries()) {
          if (lib.dtype != dtype) continue;
          std::printf("| %s | %s | %lld | %s |", model.name.c_str(), dtype_name(dtype),
                      static_cast<long long>(m), lib.name.c_str());
          double flops = 0, seconds = 0;
          for (const Projection& p : model.projections()) {
            const at::Tensor x = at::randn({m, p.in}).to(dtype);
            const at::Tensor w = (at::randn({p.out, p.in}) * 0.02).to(dtype);
            at::Tensor y = at::empty({m, p.out}, at::TensorOptions(lib.out_dtype));
            const double t = best_seconds([&] { lib.run(x, w, y); }, budget);
            const double f = 2.0 * static_cast<double>(m * p.in * p.out);
            flops += f;
            seconds += t;
            std::printf(" %.0f |", f / t / 1e9);
            std::fflush(stdout);
          }
          const double layer = flops / seconds / 1e9;
          std::printf(" **%.0f** |\n", layer);
          auto& best = ceiling[model.name][dtype_name(dtype)][m];
          if (layer > best.first) best = {layer, lib.name};
        }
      }
    }
  }
  std::printf("\nCeiling (the best library's layer figure, GFLOP/s):\n\n| model | dtype |");
  for (int64_t m : tokens) std::printf(" M = %lld |", static_cast<long long>(m));
  std::printf("\n|---|---|");
  for (size_t i = 0; i < tokens.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const auto& [model, by_dtype] : ceiling)
    for (const auto& [dtype, by_m] : by_dtype) {
      std::printf("| %s | %s |", model.c_str(), dtype.c_str());
      for (const auto& [m, best] : by_m)
        std::printf(" %.0f (%s) |", best.first, best.second.c_str());
      std::printf("\n");
    }
  if (nf4) nf4_rows(models, tokens, budget);
  if (!json_path.empty()) {
    // {"4B": {"bfloat16": {"128": 850.0, ...}, ...}, ...} in GFLOP/s; written to a temporary
    // path and renamed, so a reader never sees half a file.
    std::ostringstream js;
    js << "{";
    const char* sep_model = "";
    for (const auto& [model, by_dtype] : ceiling) {
      js << sep_model << "\"" << model << "\": {";
      const char* sep_dtype = "";
      for (const auto& [dtype, by_m] : by_dtype) {
        js << sep_dtype << "\"" << dtype << "\": {";
        const char* sep_m = "";
        for (const auto& [m, best] : by_m) {
          js << sep_m << "\"" << m << "\": " << best.first;
          sep_m = ", ";
        }
        js << "}";
        sep_dtype = ", ";
      }
      js << "}";
      sep_model = ", ";
    }
    js << "}\n";
    const std::string tmp = json_path + ".tmp";
    {
      std::ofstream out(tmp);
      if (!(out << js.str())) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), json_path.c_str()) != 0)
      throw std::runtime_error("cannot rename " + tmp + " to " + json_path);
  }
  return 0;
}
