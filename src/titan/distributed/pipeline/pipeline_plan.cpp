#include "titan/distributed/pipeline/pipeline_plan.h"

#include "titan/common/error.h"
#include "titan/distributed/pipeline/lower_schedule.h"
#include "titan/distributed/pipeline/schedule_orders.h"

namespace titan::distributed::pipeline {
namespace {

// torchtitan's count: with layers_per_stage, enough stages for the layers and the embedding
// and head (counted as first/last_less_layers layers); else one stage per rank, two with a
// multi-stage schedule.
int64_t stage_count(const config::ParallelismConfig& p, ScheduleKind kind, int64_t layers) {
  const int64_t pp = p.pipeline_parallel_degree;
  const std::string name = schedule_name(kind);
  if (p.pipeline_parallel_layers_per_stage < 1) return pp * (single_stage(kind) ? 1 : 2);
  const int64_t per = p.pipeline_parallel_layers_per_stage;
  const int64_t effective = layers + p.pipeline_parallel_first_stage_less_layers +
                            p.pipeline_parallel_last_stage_less_layers;
  const int64_t stages = (effective + per - 1) / per;
  TITAN_CHECK(stages % pp == 0, "parallelism.pipeline_parallel_layers_per_stage = ", per, ": ",
              layers, " layers (and the embedding and head, counted as ",
              p.pipeline_parallel_first_stage_less_layers, " + ",
              p.pipeline_parallel_last_stage_less_layers, ") make ", stages,
              " stages, which parallelism.pipeline_parallel_degree = ", pp, " does not divide");
  const int64_t per_rank = stages / pp;
  TITAN_CHECK(!single_stage(kind) || per_rank == 1,
              "parallelism.pipeline_parallel_schedule = ", name,
              " runs one stage per rank, but parallelism.pipeline_parallel_layers_per_stage", " = ",
              per, " makes ", stages, " stages over ", pp,
              " ranks; use a multi-stage schedule (Interleaved1F1B, ...) or more layers per stage");
  TITAN_CHECK(single_stage(kind) || per_rank >= 2,
              "parallelism.pipeline_parallel_schedule = ", name,
              " needs at least 2 stages per rank, but "
              "parallelism.pipeline_parallel_layers_per_stage = ",
              per, " makes ", stages, " stages over ", pp, " ranks");
  return stages;
}

}  // namespace

std::string PipelinePlan::describe_stage(int64_t stage) const {
  const models::StageParts& p = parts.at(static_cast<size_t>(stage));
  std::string out = "stage " + std::to_string(stage) + " of " + std::to_string(stages()) + ":";
  std::string sep = " ";
  if (p.embedding) {
    out += sep + "the embedding";
    sep = ", ";
  }
  if (p.end_layer > p.first_layer) {
    out += sep + (p.end_layer - p.first_layer == 1 ? "layer " : "layers ") +
           std::to_string(p.first_layer);
    if (p.end_layer - p.first_layer > 1) out += "-" + std::to_string(p.end_layer - 1);
    sep = ", ";
  }
  if (p.head) out += sep + "the final norm and head";
  return out;
}

PipelinePlan plan_pipeline(const config::ParallelismConfig& p, int64_t local_batch_size,
                           int64_t layers) {
  PipelinePlan plan;
  plan.schedule = parse_schedule(p.pipeline_parallel_schedule);
  const int64_t pp = p.pipeline_parallel_degree;
  plan.placement.ranks = pp;
  plan.placement.stages = stage_count(p, plan.schedule, layers);
  plan.placement.v = v_placement(plan.schedule);
  try {
    plan.parts = models::split_layers(
        layers, plan.placement.stages, std::max<int64_t>(0, p.pipeline_parallel_layers_per_stage),
        p.pipeline_parallel_first_stage_less_layers, p.pipeline_parallel_last_stage_less_layers);
  } catch (const Error& e) {
    fail(
        "the model's layers do not split into the pipeline's stages (parallelism."
        "pipeline_parallel_degree = ",
        pp, ", pipeline_parallel_schedule = ", schedule_name(plan.schedule),
        ", pipeline_parallel_layers_per_stage = ", p.pipeline_parallel_layers_per_stage,
        ", pipeline_parallel_first_stage_less_layers = ",
        p.pipeline_parallel_first_stage_less_layers,
        ", pipeline_parallel_last_stage_less_layers = ", p.pipeline_parallel_last_stage_less_layers,
        "): ", e.what());
  }
  plan.microbatch_size = p.pipeline_parallel_microbatch_size;
  TITAN_CHECK(plan.microbatch_size >= 1 && local_batch_size % plan.microbatch_size == 0,
              "training.local_batch_size = ", local_batch_size,
              " does not divide into pipeline microbatches of "
              "parallelism.pipeline_parallel_microbatch_size = ",
              plan.microbatch_size, " rows");
  plan.microbatches = local_batch_size / plan.microbatch_size;
  const RankActions order =
      compute_order(plan.schedule, pp, plan.stages_per_rank(), plan.microbatches);
  plan.training = lower_schedule(order, plan.placement, plan.microbatches);
  plan.validation = lower_schedule(forward_only(order), plan.placement, plan.microbatches);
  return plan;
}

void check_pipeline_model(const PipelinePlan& plan, int64_t pp, bool tie_word_embeddings,
                          const std::vector<std::string>& converters) {
  TITAN_CHECK(!(tie_word_embeddings && plan.placement.v),
              "parallelism.pipeline_parallel_schedule = ", schedule_name(plan.schedule),
              " puts the first and the last stage on one rank, which a model with tied "
              "embeddings (tie_word_embeddings) cannot run yet; use InterleavedZeroBubble");
  TITAN_CHECK(converters.empty(), "parallelism.pipeline_parallel_degree = ", pp,
              ": model.converters (LoRA) does not run under pipeline parallelism yet");
}

}  // namespace titan::distributed::pipeline
