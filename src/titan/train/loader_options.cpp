#include "titan/train/loader_options.h"

#include "titan/common/error.h"
#include "titan/data/chat_template.h"

namespace titan::train {

data::LoaderOptions loader_options(const config::TrainerConfig& cfg, int32_t eos_id) {
  const config::TrainingConfig& t = cfg.training;
  data::LoaderOptions o;
  o.local_batch_size = t.local_batch_size;
  o.seq_len = t.seq_len;
  o.eos_id = eos_id;
  o.text_field = t.dataset_text_field;
  o.document_masking = t.document_masking;
  o.shift_within_documents = t.packing == "torchtitan";
  if (t.shuffle) o.shuffle_seed = static_cast<uint64_t>(t.seed);
  o.prefetch = t.prefetch_batches;
  if (t.sft) o.chat_template = data::load_chat_template(cfg.model.hf_assets_path);
  return o;
}

models::PackedDocuments packed_documents(const data::Batch& batch, at::Device device) {
  models::PackedDocuments d;
  // Positions alone: a context-parallel part of causal rows (each token's place in its row).
  if (batch.positions.defined()) d.positions = batch.positions.to(device);
  if (batch.document_ids.defined()) d.document_ids = batch.document_ids.to(device);
  d.positions_end = batch.positions_end;
  return d;
}

int64_t micro_batches_per_step(const config::TrainingConfig& t, int64_t dp_degree) {
  if (t.global_batch_size < 0) return 1;
  const int64_t per_pass = t.local_batch_size * dp_degree;
  TITAN_CHECK(
      t.global_batch_size % per_pass == 0, "training.global_batch_size (", t.global_batch_size,
      ") must be a multiple of training.local_batch_size x data-parallel degree (", per_pass, ")");
  return t.global_batch_size / per_pass;
}

}  // namespace titan::train
