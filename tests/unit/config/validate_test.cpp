// Value checks: every enumeration and range names key, value and what is accepted.
#include "titan/config/validate.h"

#include <gtest/gtest.h>

#include <functional>

#include "config_test_util.h"

namespace titan::config {
namespace {

using testing::error_of;

std::string invalid(const std::function<void(TrainerConfig&)>& change) {
  TrainerConfig c;
  change(c);
  return error_of([&] { validate_config(c); });
}

TEST(Validate, DefaultsAreValid) { EXPECT_NO_THROW(validate_config(TrainerConfig{})); }

TEST(Validate, EnumerationsListTheAcceptedValues) {
  struct Case {
    std::function<void(TrainerConfig&)> change;
    const char* expected;
  };
  const Case cases[] = {
      {[](auto& c) { c.training.dtype = "fp16"; },
       "training.dtype = \"fp16\": accepted values are float32, bfloat16"},
      {[](auto& c) { c.training.mixed_precision_param = "half"; }, "auto, float32, bfloat16"},
      {[](auto& c) { c.training.mixed_precision_reduce = "auto"; },
       "training.mixed_precision_reduce = \"auto\""},
      {[](auto& c) { c.training.device = "gpu"; },
       "training.device = \"gpu\": accepted values are auto, cpu, cuda"},
      {[](auto& c) { c.optimizer.name = "SGD"; },
       "optimizer.name = \"SGD\": accepted values are AdamW"},
      {[](auto& c) { c.optimizer.implementation = "fast"; }, "fused, foreach, for-loop"},
      {[](auto& c) { c.lr_scheduler.decay_type = "step"; }, "linear, sqrt, cosine"},
      {[](auto& c) { c.checkpoint.export_dtype = "int8"; }, "float32, bfloat16, float16"},
      {[](auto& c) { c.checkpoint.async_mode = "sync"; },
       "checkpoint.async_mode = \"sync\": accepted values are disabled, async"},
      {[](auto& c) { c.activation_checkpoint.mode = "op"; }, "none, selective, full"},
      {[](auto& c) {
         c.activation_checkpoint.mode = "selective";
         c.activation_checkpoint.selective_ac_option = "half";
       },
       "activation_checkpoint.selective_ac_option = \"half\": accepted values are a positive "
       "integer N (every N-th block) or op"},
      {[](auto& c) { c.overrides.imports = {"rms_norm"}; },
       "override.imports entry \"rms_norm\": expected OP=IMPL or OP=IMPL@GLOB"},
      {[](auto& c) { c.model.moe_load_balancing = "bias"; }, "none, aux_loss, expert_bias"},
  };
  for (const auto& test_case : cases)
    EXPECT_CONTAINS(invalid(test_case.change), test_case.expected);
}

TEST(Validate, ModelNameIsCheckedAgainstTheNamesTheCallerKnows) {
  TrainerConfig c;
  c.model.name = "llama";
  EXPECT_CONTAINS(error_of([&] {
                    validate_config(c, {"qwen3", "transformers"});
                  }),
                  "model.name = \"llama\": accepted values are qwen3, transformers");
  c.model.name = "qwen3";
  EXPECT_NO_THROW(validate_config(c, {"qwen3"}));
}

TEST(Validate, PipelineScheduleAndMicrobatches) {
  // torchtitan's names in any case; a near miss gets a did-you-mean.
  EXPECT_NO_THROW(validate_config([] {
    TrainerConfig c;
    c.parallelism.pipeline_parallel_schedule = "interleaved1f1b";
    return c;
  }()));
  const std::string typo =
      invalid([](auto& c) { c.parallelism.pipeline_parallel_schedule = "Interleaved1F1"; });
  EXPECT_NE(typo.find("parallelism.pipeline_parallel_schedule = \"Interleaved1F1\" (did you mean "
                      "\"Interleaved1F1B\"?): accepted values are GPipe, 1F1B"),
            std::string::npos)
      << typo;
  // The local batch must split into microbatches (only checked with a pipeline).
  const std::string rows = invalid([](auto& c) {
    c.parallelism.pipeline_parallel_degree = 2;
    c.training.local_batch_size = 3;
    c.parallelism.pipeline_parallel_microbatch_size = 2;
  });
  EXPECT_NE(rows.find("training.local_batch_size = 3 does not divide into pipeline microbatches "
                      "of parallelism.pipeline_parallel_microbatch_size = 2"),
            std::string::npos)
      << rows;
  EXPECT_NE(invalid([](auto& c) {
              c.parallelism.pipeline_parallel_layers_per_stage = 0;
            }).find("parallelism.pipeline_parallel_layers_per_stage = 0: must be >= 1 or -1"),
            std::string::npos);
}

TEST(Validate, SelectiveOptionIsAFrequencyOrOp) {
  EXPECT_EQ(selective_ac_frequency("op"), 0);
  EXPECT_EQ(selective_ac_frequency("3"), 3);
  EXPECT_CONTAINS(error_of([&] { selective_ac_frequency("0"); }), "selective_ac_option = \"0\"");
}

TEST(Validate, RangesNameKeyAndValue) {
  struct Case {
    std::function<void(TrainerConfig&)> change;
    const char* expected;
  };
  const Case cases[] = {
      {[](auto& c) { c.training.steps = 0; }, "training.steps = 0: must be >= 1"},
      {[](auto& c) { c.training.local_batch_size = -2; }, "training.local_batch_size = -2"},
      {[](auto& c) { c.training.seq_len = 0; }, "training.seq_len = 0"},
      {[](auto& c) { c.training.global_batch_size = 0; }, "training.global_batch_size = 0"},
      {[](auto& c) { c.training.max_norm = 0; }, "training.max_norm = 0.0: must be > 0"},
      {[](auto& c) { c.optimizer.lr = -1e-3; }, "optimizer.lr = -0.001: must be >= 0"},
      {[](auto& c) { c.optimizer.betas = {0.9}; }, "optimizer.betas = [0.9]: must be exactly two"},
      {[](auto& c) {
         c.optimizer.betas = {0.9, 1.0};
       },
       "optimizer.betas = [0.9, 1.0]: must be two values in [0, 1)"},
      {[](auto& c) {
         c.optimizer.betas = {-0.1, 0.9};
       },
       "optimizer.betas"},
      {[](auto& c) { c.optimizer.eps = 0; }, "optimizer.eps = 0.0: must be > 0"},
      {[](auto& c) { c.optimizer.weight_decay = -1; }, "optimizer.weight_decay"},
      {[](auto& c) { c.optimizer.param_groups = {"*.bias"}; },
       "optimizer.param_groups: malformed entry '*.bias'"},
      {[](auto& c) { c.optimizer.param_groups = {"=0.1"}; }, "GLOB=WEIGHT_DECAY"},
      {[](auto& c) { c.optimizer.param_groups = {"*=x"}; }, "entry '*=x' has weight decay 'x'"},
      {[](auto& c) { c.lr_scheduler.warmup_steps = -1; },
       "lr_scheduler.warmup_steps = -1: must be >= 0"},
      {[](auto& c) { c.lr_scheduler.total_steps = 0; }, "lr_scheduler.total_steps = 0"},
      {[](auto& c) { c.lr_scheduler.decay_ratio = 1.5; }, "lr_scheduler.decay_ratio = 1.5"},
      {[](auto& c) { c.lr_scheduler.decay_ratio = -0.5; }, "lr_scheduler.decay_ratio = -0.5"},
      {[](auto& c) { c.lr_scheduler.min_lr_factor = 2; },
       "lr_scheduler.min_lr_factor = 2.0: must be in [0, 1]"},
      {[](auto& c) { c.metrics.log_freq = 0; }, "metrics.log_freq = 0"},
      {[](auto& c) { c.checkpoint.keep_latest_k = -1; }, "checkpoint.keep_latest_k = -1"},
      {[](auto& c) { c.checkpoint.interval = 0; }, "checkpoint.interval = 0"},
      {[](auto& c) { c.checkpoint.load_step = -2; }, "checkpoint.load_step = -2"},
      {[](auto& c) { c.parallelism.data_parallel_shard_degree = 0; },
       "parallelism.data_parallel_shard_degree = 0: must be >= 1 or -1"},
      {[](auto& c) { c.parallelism.tensor_parallel_degree = -1; },
       "parallelism.tensor_parallel_degree = -1: must be >= 1"},
      {[](auto& c) { c.comm.init_timeout_seconds = 0; }, "comm.init_timeout_seconds = 0"},
  };
  for (const auto& test_case : cases)
    EXPECT_CONTAINS(invalid(test_case.change), test_case.expected);
}

TEST(Validate, AcceptsBoundaryValues) {
  TrainerConfig c;
  c.lr_scheduler.decay_ratio = 0.0;
  c.lr_scheduler.min_lr_factor = 1.0;
  c.lr_scheduler.warmup_steps = 0;
  c.optimizer.lr = 0.0;
  c.optimizer.betas = {0.0, 0.999};
  c.optimizer.param_groups = {"*.norm.weight=0", "*=0.1"};
  c.checkpoint.keep_latest_k = 0;
  c.checkpoint.load_step = 0;
  c.training.global_batch_size = 64;
  EXPECT_NO_THROW(validate_config(c));
  c.lr_scheduler.decay_ratio = 1.0;
  EXPECT_NO_THROW(validate_config(c));
}

TEST(ParallelDegrees, ResolvesMinusOneToTheRemainingRanks) {
  ParallelismConfig p;
  EXPECT_EQ(resolved_data_parallel_shard_degree(p, 8), 8);
  p.data_parallel_replicate_degree = 2;
  EXPECT_EQ(resolved_data_parallel_shard_degree(p, 8), 4);
  p.tensor_parallel_degree = 2;
  EXPECT_EQ(resolved_data_parallel_shard_degree(p, 8), 2);
  EXPECT_NO_THROW(check_parallel_degrees(p, 8));
  p.data_parallel_shard_degree = 2;
  EXPECT_NO_THROW(check_parallel_degrees(p, 8));
}

TEST(ParallelDegrees, ProductMustEqualTheWorldSize) {
  ParallelismConfig p;
  p.data_parallel_replicate_degree = 3;
  auto message = error_of([&] { check_parallel_degrees(p, 4); });
  EXPECT_CONTAINS(message, "data_parallel_replicate_degree=3");
  EXPECT_CONTAINS(message, "world size 4");
  p.data_parallel_replicate_degree = 2;
  p.data_parallel_shard_degree = 4;
  message = error_of([&] { check_parallel_degrees(p, 4); });
  EXPECT_CONTAINS(message, "multiply to 8 but the world size is 4");
  p.data_parallel_shard_degree = 0;
  EXPECT_CONTAINS(error_of([&] { check_parallel_degrees(p, 4); }),
                  "parallelism.data_parallel_shard_degree = 0");
}

TEST(ParallelDegrees, ExpertParallelismMustDivideItsBorrowedRanks) {
  ParallelismConfig p;
  p.expert_parallel_degree = 4;
  EXPECT_NO_THROW(check_parallel_degrees(p, 8));
  p.expert_parallel_degree = 3;
  EXPECT_CONTAINS(error_of([&] { check_parallel_degrees(p, 8); }),
                  "parallelism.expert_parallel_degree = 3 must divide");
}

}  // namespace
}  // namespace titan::config

namespace titan::config {
namespace {

TEST(Validate, TheDpoSectionNamesEachBadValue) {
  struct Case {
    std::function<void(TrainerConfig&)> change;
    const char* expected;
  };
  const Case cases[] = {
      {[](auto& c) { c.training.objective = "ppo"; },
       "training.objective = \"ppo\": accepted values are lm, dpo"},
      {[](auto& c) { c.dpo.beta = 0; }, "dpo.beta = 0.0: must be > 0"},
      {[](auto& c) {
         c.dpo.loss_type = {"sigmoid", "kto"};
       },
       "dpo.loss_type = \"kto\": accepted values are sigmoid, ipo, hinge, robust"},
      {[](auto& c) { c.dpo.loss_type = {}; }, "dpo.loss_type is empty"},
      {[](auto& c) {
         c.dpo.loss_weights = {1.0, 2.0};
       },
       "dpo.loss_weights = [1.0, 2.0]: must be empty or one weight per dpo.loss_type entry (1)"},
      {[](auto& c) { c.dpo.label_smoothing = 0.5; },
       "dpo.label_smoothing = 0.5: must be in [0, 0.5)"},
      {[](auto& c) { c.dpo.loss_type = {"exo_pair"}; }, "> 0 with the exo_pair loss"},
      {[](auto& c) { c.dpo.reference = "frozen"; }, "initial, adapters_off"},
      {[](auto& c) { c.dpo.max_length = 1; }, "dpo.max_length = 1: must be >= 2 or -1"},
      {[](auto& c) { c.dpo.truncation_mode = "keep_middle"; }, "keep_start, keep_end"},
      {[](auto& c) {
         c.training.objective = "dpo";
         c.training.sft = true;
       },
       "training.sft = true and training.objective = \"dpo\" do not go together"},
      {[](auto& c) {
         c.training.objective = "dpo";
         c.training.packing = "hf_flattening";
         c.training.document_masking = true;
       },
       "training.packing = \"hf_flattening\" does not apply to training.objective = \"dpo\""},
      {[](auto& c) {
         c.training.objective = "dpo";
         c.dpo.reference = "adapters_off";
       },
       "dpo.reference = \"adapters_off\" needs LoRA"},
  };
  for (const auto& test_case : cases)
    EXPECT_CONTAINS(invalid(test_case.change), test_case.expected);

  TrainerConfig lora_dpo;
  lora_dpo.training.objective = "dpo";
  lora_dpo.model.converters = {"lora"};
  lora_dpo.dpo.reference = "adapters_off";
  lora_dpo.dpo.loss_type = {"sigmoid", "sft"};
  lora_dpo.dpo.loss_weights = {1.0, 0.5};
  EXPECT_NO_THROW(validate_config(lora_dpo));
}

}  // namespace
}  // namespace titan::config
