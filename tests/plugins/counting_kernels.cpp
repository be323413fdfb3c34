// A kernel library for the tests, loaded with --override.libraries: an rms_norm written
// differently from reference (sum / D and a division instead of mean and rsqrt) but equal in
// value, which counts its calls and prints the count when the library is unloaded; and a
// "cuda_only" rms_norm that declares it runs on CUDA only.
#include <atomic>
#include <cstdio>

#include "titan/kernels/plugin_api.h"

namespace {

std::atomic<long> calls{0};

// Prints at exit (when titan's registry closes the library), on stderr.
struct CallReport {
  ~CallReport() { std::fprintf(stderr, "[counting_rms_norm] calls=%ld\n", calls.load()); }
} report;

at::Tensor counting_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  ++calls;
  const at::Tensor x32 = x.to(at::kFloat);
  const double width = static_cast<double>(x.size(-1));
  const at::Tensor mean_square = (x32 * x32).sum({-1}, /*keepdim=*/true) / width;
  const at::Tensor normed = x32 / at::sqrt(mean_square + eps);
  return weight.to(x.scalar_type()) * normed.to(x.scalar_type());
}

bool any_device(at::DeviceType, at::ScalarType) { return true; }
bool cuda_only(at::DeviceType device, at::ScalarType) { return device == at::kCUDA; }

}  // namespace

TITAN_KERNEL_LIBRARY(registrar) {
  registrar.add("counting", titan::kernels::RmsNormFn{&counting_rms_norm}, &any_device,
                "rms_norm by sum/D and a division, counting its calls");
  registrar.add("cuda_only", titan::kernels::RmsNormFn{&counting_rms_norm}, &cuda_only,
                "declares CUDA only");
}
