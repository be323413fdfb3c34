#include "titan/train/step_scale.h"

#include <limits>

#include "titan/common/error.h"
#include "titan/train/loss.h"

namespace titan::train {
namespace {

int64_t local_tokens(const std::vector<data::Batch>& batches) {
  int64_t tokens = 0;
  for (const data::Batch& b : batches) tokens += count_valid_tokens(b.labels);  // on the host
  return tokens;
}

}  // namespace

at::Tensor StepScale::loss(const at::Tensor& cross_entropy_sum, const at::Tensor& auxiliary) const {
  TITAN_CHECK(cross_entropy_sum.defined() || auxiliary.defined(), "a loss with no terms");
  if (!cross_entropy_sum.defined()) return auxiliary / extra_scale;
  at::Tensor loss = cross_entropy_sum / divisor;
  if (auxiliary.defined()) loss = loss + auxiliary / extra_scale;
  if (poison) loss = loss * std::numeric_limits<double>::quiet_NaN();
  return loss;
}

StepScale step_scale(const std::vector<data::Batch>& batches, models::ParallelContext& parallel,
                     int64_t forwards, at::Device device) {
  at::Tensor valid_tokens = at::full({1}, static_cast<double>(local_tokens(batches)),
                                     at::TensorOptions(device).dtype(at::kDouble));
  parallel.all_reduce("loss", valid_tokens);
  StepScale scale;
  scale.divisor = valid_tokens.reshape({}).to(at::kFloat);
  scale.extra_scale = static_cast<double>(forwards * parallel.purpose_size("batch"));
  return scale;
}

StepLoss reduce_step_loss(const at::Tensor& loss, const std::vector<data::Batch>& batches,
                          const StepScale& scale, models::ParallelContext& parallel) {
  StepLoss out;
  out.tokens = scale.divisor.to(at::kDouble).reshape({1});
  const int64_t mine = local_tokens(batches);
  out.max_loss =
      mine > 0 ? loss * (out.tokens / static_cast<double>(mine)) : at::zeros({1}, loss.options());
  parallel.all_reduce("loss", out.max_loss, models::Reduction::kMax);
  out.loss = loss.clone();
  parallel.all_reduce("loss", out.loss);
  return out;
}

}  // namespace titan::train
