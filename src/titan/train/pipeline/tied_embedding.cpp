#include "titan/train/pipeline/tied_embedding.h"

#include <ATen/core/grad_mode.h>

namespace titan::train {

void sum_tied_gradients(at::Tensor& param, distributed::Group& pp, int64_t peer, bool sends_first) {
  at::NoGradGuard no_grad;
  if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
  at::Tensor mine = param.grad();
  at::Tensor theirs = at::empty_like(mine, at::MemoryFormat::Contiguous);
  distributed::Group::Pending sent, received;
  if (sends_first) {
    sent = pp.send_async(mine, peer);
    received = pp.recv_async(theirs, peer);
  } else {
    received = pp.recv_async(theirs, peer);
    sent = pp.send_async(mine, peer);
  }
  received.wait();
  sent.wait();
  mine.add_(theirs);
}

}  // namespace titan::train
