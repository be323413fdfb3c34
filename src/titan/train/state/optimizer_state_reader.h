// The optimizer part of a checkpoint, read into what AdamW::load_state takes: every tensor as
// this rank's piece, whatever layout saved it. The float32 moments and AdamW8bit's codes are
// laid out like their parameter, an absmax as block_layout.h says, the step counters whole.
// AdamW8bit states saved by a layout whose blocks this rank's pieces would cut (the parameter
// keeps float32 states here) are read whole, dequantised and cut to this rank's piece, and
// handed over as float32 moments.
#pragma once

#include <functional>
#include <string>

#include "titan/common/named_tensors.h"
#include "titan/train/optimizer.h"
#include "titan/train/state/stateful.h"

namespace titan::train {

// `params`: the tensors the state may belong to (this rank's pieces); `held_elsewhere`
// (may be unset) names another pipeline stage's parameters, whose state is passed over.
NamedTensors read_optimizer_state(const PartReader& in, const AdamW& optimizer,
                                  const NamedTensors& params,
                                  const std::function<bool(const std::string&)>& held_elsewhere);

}  // namespace titan::train
