// The pipeline a config asks for over a model of `layers` blocks: the schedule, the number of
// stages and which rank holds each (torchtitan's _get_pipeline_metadata and stage-to-rank
// mapping), each stage's layers (models::split_layers), the microbatches of a local batch, and
// every rank's lowered action list for training and for validation (forwards only). Every rank
// computes the same plan. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/distributed/pipeline/pipeline_action.h"
#include "titan/distributed/pipeline/schedule_kind.h"
#include "titan/distributed/pipeline/stage_placement.h"
#include "titan/models/stage_parts.h"

namespace titan::distributed::pipeline {

struct PipelinePlan {
  ScheduleKind schedule = ScheduleKind::k1F1B;
  StagePlacement placement;
  int64_t microbatches = 1;
  int64_t microbatch_size = 1;            // rows
  std::vector<models::StageParts> parts;  // per stage
  RankActions training;                   // per pipeline rank, lowered
  RankActions validation;

  int64_t stages() const { return placement.stages; }
  int64_t stages_per_rank() const { return placement.stages / placement.ranks; }
  // "stage 1 of 4: layers 2-3, the final norm and head"
  std::string describe_stage(int64_t stage) const;
};

// Throws one titan::Error naming the values for each problem: a layer count the stages do not
// split, a stage count the ranks do not divide or the schedule cannot hold, a batch that does
// not divide into microbatches, a microbatch count the schedule cannot run.
PipelinePlan plan_pipeline(const config::ParallelismConfig& parallelism, int64_t local_batch_size,
                           int64_t layers);

// What a pipeline asks of the model, checked where the stages are made and by `titan configs
// --print`'s layout check: a schedule that puts the first and the last stage on one rank (V
// placement) cannot run tied embeddings; model converters (LoRA) do not run under pipeline
// parallelism yet. Throws one titan::Error naming the setting.
void check_pipeline_model(const PipelinePlan& plan, int64_t pp, bool tie_word_embeddings,
                          const std::vector<std::string>& converters);

}  // namespace titan::distributed::pipeline
