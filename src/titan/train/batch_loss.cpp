#include "titan/train/batch_loss.h"

#include "titan/train/loader_options.h"

namespace titan::train {

BatchLoss batch_loss(models::Model& model, const CausalLmLoss& loss, const data::Batch& batch,
                     at::Device device) {
  const models::ModelOutput out =
      model.forward_packed(batch.inputs.to(device), packed_documents(batch, device));
  BatchLoss b;
  b.loss_sum = loss.sum(out.hidden, batch.labels);
  b.tokens = count_valid_tokens(batch.labels);
  b.extra_loss = out.extra_loss;
  return b;
}

}  // namespace titan::train
