#include "titan/cli/layout_check.h"

#include "titan/common/error.h"
#include "titan/distributed/pipeline/pipeline_plan.h"
#include "titan/distributed/sequence_shards.h"
#include "titan/models/common/decoder.h"
#include "titan/models/common/decoder_plan.h"
#include "titan/models/model_spec.h"

namespace titan::cli {

std::vector<std::string> layout_check(const config::TrainerConfig& cfg,
                                      const distributed::ParallelDims& dims) {
  std::vector<std::string> lines;
  const models::ModelSpec& spec = models::get_model_spec(cfg.model.name);
  models::BuildOptions build;
  build.device = at::kMeta;
  build.init_weights = false;
  // A native model, built as shapes only, for the rules on its dimensions.
  std::unique_ptr<models::Model> model;
  const models::Decoder* decoder = nullptr;
  if (spec.overridable_ops && (dims.tp > 1 || dims.ep > 1 || dims.pp > 1)) {
    model = spec.build(cfg, build);
    decoder = &models::as_decoder(*model);
  }
  if (dims.tp > 1 || dims.ep > 1) {
    TITAN_CHECK(decoder != nullptr, "model.name = ", spec.name, " (", spec.description,
                ") has no tensor or expert parallelism; the native models do");
    models::check_decoder_degrees(decoder->config(), cfg, dims.tp, dims.ep);
    lines.push_back("tp " + std::to_string(dims.tp) + " and ep " + std::to_string(dims.ep) +
                    " divide the model's heads, MLP and experts");
  }
  if (dims.cp > 1) {
    const distributed::SequenceShards shards(
        cfg.training.seq_len, dims.cp,
        distributed::parse_load_balancer(cfg.parallelism.context_parallel_load_balancer));
    lines.push_back("cp " + std::to_string(dims.cp) + " splits training.seq_len " +
                    std::to_string(cfg.training.seq_len));
  }
  if (dims.pp > 1) {
    TITAN_CHECK(spec.pipeline && decoder != nullptr,
                "parallelism.pipeline_parallel_degree = ", dims.pp, ": model.name = ", spec.name,
                " (", spec.description,
                ") cannot be split into pipeline stages; the native model can");
    const auto plan = distributed::pipeline::plan_pipeline(
        cfg.parallelism, cfg.training.local_batch_size, decoder->config().num_layers);
    distributed::pipeline::check_pipeline_model(
        plan, dims.pp, decoder->config().tie_word_embeddings, cfg.model.converters);
    lines.push_back("pp " + std::to_string(dims.pp) + ": " + std::to_string(plan.stages()) +
                    " stages, " + std::to_string(plan.microbatches) + " microbatches of " +
                    std::to_string(plan.microbatch_size) + " rows (" +
                    distributed::pipeline::schedule_name(plan.schedule) + ")");
  }
  const auto& t = cfg.training;
  if (t.global_batch_size >= 0) {
    const int64_t per_pass = t.local_batch_size * dims.dp_size();
    TITAN_CHECK(t.global_batch_size % per_pass == 0, "training.global_batch_size (",
                t.global_batch_size,
                ") must be a multiple of training.local_batch_size x data-parallel degree (",
                per_pass, ")");
    lines.push_back("global batch " + std::to_string(t.global_batch_size) + " = " +
                    std::to_string(t.global_batch_size / per_pass) + " x local batch " +
                    std::to_string(t.local_batch_size) + " x " + std::to_string(dims.dp_size()) +
                    " data-parallel ranks");
  }
  return lines;
}

}  // namespace titan::cli
