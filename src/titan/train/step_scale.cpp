#include "titan/train/step_scale.h"

#include <limits>

#include "titan/common/error.h"

namespace titan::train {

at::Tensor StepScale::loss(const at::Tensor& cross_entropy_sum, const at::Tensor& auxiliary) const {
  TITAN_CHECK(cross_entropy_sum.defined() || auxiliary.defined(), "a loss with no terms");
  if (!cross_entropy_sum.defined()) return auxiliary / extra_scale;
  at::Tensor loss = cross_entropy_sum / divisor;
  if (auxiliary.defined()) loss = loss + auxiliary / extra_scale;
  if (poison) loss = loss * std::numeric_limits<double>::quiet_NaN();
  return loss;
}

}  // namespace titan::train
