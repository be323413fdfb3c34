// torchtitan's pipeline and context-parallel keys now that titan has both parallelisms: its own
// fields are not torchtitan rules, and the keys of torchtitan's other mechanisms are accepted
// when they ask for nothing and refused, naming what titan does instead, when they do.
#include "titan/config/torchtitan_keys.h"

#include <gtest/gtest.h>

namespace titan::config {
namespace {

using Action = TorchtitanKey::Action;

TEST(TorchtitanKeys, TitansOwnPipelineAndContextFieldsAreNoRules) {
  for (const char* key :
       {"parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_microbatch_size",
        "parallelism.pipeline_parallel_layers_per_stage",
        "parallelism.pipeline_parallel_first_stage_less_layers",
        "parallelism.pipeline_parallel_last_stage_less_layers",
        "parallelism.context_parallel_load_balancer"})
    EXPECT_FALSE(torchtitan_key(key, "1").has_value()) << key;
}

TEST(TorchtitanKeys, OtherMechanismsAreInertWhenOffAndRefusedWhenOn) {
  auto rule = [](const char* key, const char* value) {
    const auto r = torchtitan_key(key, value);
    EXPECT_TRUE(r.has_value()) << key;
    return r.value_or(TorchtitanKey{});
  };
  EXPECT_EQ(rule("parallelism.context_parallel_rotate_method", "allgather").action, Action::kNote);
  const TorchtitanKey ring = rule("parallelism.context_parallel_rotate_method", "alltoall");
  EXPECT_EQ(ring.action, Action::kRefuse);
  EXPECT_NE(ring.message.find("all-gathers keys and values"), std::string::npos) << ring.message;
  EXPECT_EQ(rule("parallelism.pipeline_parallel_split_points", "").action, Action::kNote);
  const TorchtitanKey split = rule("parallelism.pipeline_parallel_split_points", "layers.2");
  EXPECT_EQ(split.action, Action::kRefuse);
  EXPECT_NE(split.message.find("pipeline_parallel_layers_per_stage"), std::string::npos)
      << split.message;
  EXPECT_EQ(rule("parallelism.pipeline_parallel_schedule_csv", "s.csv").action, Action::kRefuse);
  const TorchtitanKey count = rule("parallelism.pipeline_parallel_microbatches", "8");
  EXPECT_EQ(count.action, Action::kNote);
  EXPECT_NE(count.message.find("pipeline_parallel_microbatch_size"), std::string::npos);
}

}  // namespace
}  // namespace titan::config
