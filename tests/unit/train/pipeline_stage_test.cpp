// A pipeline's stages run by the schedule runner in one process (every stage on one rank, so
// the stages hand each other their tensors and nothing is sent): the loss and every gradient
// equal the whole model's over the same microbatches, for full backwards and for the zero-bubble
// split into input and weight backwards, dense (tied) and MoE with the auxiliary loss split
// over the stages.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "titan/distributed/pipeline/lower_schedule.h"
#include "titan/distributed/pipeline/schedule_orders.h"
#include "titan/models/materialize.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/model.h"
#include "titan/train/pipeline/microbatches.h"
#include "titan/train/pipeline/schedule_runner.h"

namespace titan::train {
namespace {

using distributed::pipeline::Action;
using distributed::pipeline::ActionType;
using models::Qwen3Args;
using models::Qwen3Model;

Qwen3Args tiny(bool moe) {
  Qwen3Args a;
  a.model_type = moe ? "qwen3_moe" : "qwen3";
  a.vocab_size = 97;
  a.hidden_size = 32;
  a.intermediate_size = 48;
  a.num_hidden_layers = 5;
  a.num_attention_heads = 4;
  a.num_key_value_heads = 2;
  a.head_dim = 8;
  a.tie_word_embeddings = true;
  if (moe) {
    a.num_experts = 4;
    a.num_experts_per_tok = 2;
    a.moe_intermediate_size = 16;
    a.mlp_only_layers = {1};  // a dense layer between the sparse ones
  }
  return a;
}

models::Qwen3Options aux_loss() {
  models::Qwen3Options o;
  o.balancing = models::MoeBalancing::kAuxLoss;
  o.router_aux_loss_coef = 0.5;  // large, so that a wrong split would show
  return o;
}

std::unique_ptr<Qwen3Model> build(const Qwen3Args& a, const models::StageParts* parts) {
  models::BuildOptions b;
  b.seed = 11;
  b.meta_parameters = parts != nullptr;
  auto model = std::make_unique<Qwen3Model>(a, aux_loss(), b);
  if (parts == nullptr) return model;
  models::get_model_spec("qwen3").pipeline(*model, *parts);
  models::materialize(*model, models::seeded_initialisation(*model, 11), {});
  return model;
}

data::Batch batch() {
  data::Batch b;
  b.inputs = (at::arange(48, at::kLong) * 5 + 1).remainder(97).view({4, 12});
  b.labels = (at::arange(48, at::kLong) * 7 + 3).remainder(97).view({4, 12});
  b.labels.index_put_({0, 3}, -100);  // an ignored label
  return b;
}

struct Result {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;  // summed over the stages that hold a tensor
};

// One process: the whole model over each microbatch, as the trainer's micro-batch loop runs
// it (the auxiliary loss of each forward averaged over the forwards).
Result whole_model(const Qwen3Args& a, int64_t microbatches) {
  auto model = build(a, nullptr);
  const CausalLmLoss loss(*model, nullptr);
  const data::Batch all = batch();
  const at::Tensor divisor = valid_token_count(all.labels).to(at::kFloat);
  Result r;
  for (const data::Batch& mb : split_microbatches(all, microbatches)) {
    const models::ModelOutput out = model->forward(mb.inputs);
    at::Tensor l = loss.sum(out.hidden, mb.labels) / divisor;
    if (out.extra_loss.defined()) l = l + out.extra_loss / static_cast<double>(microbatches);
    l.backward();
    r.loss += l.item<double>();
  }
  for (auto& [name, p] : model->named_parameters()) r.grads[name] = p.grad();
  return r;
}

// Every stage on this rank, run in the order of the interleaved schedules (1F1B's with full
// backwards, zero bubble's with input and weight backwards).
Result staged(const Qwen3Args& a, int64_t stages, int64_t microbatches, bool split_backward) {
  std::vector<std::unique_ptr<Qwen3Model>> models;
  for (const models::StageParts& parts : models::split_layers(a.num_hidden_layers, stages, 0, 1, 1))
    models.push_back(build(a, &parts));
  const CausalLmLoss loss(*models.back(), nullptr);
  std::vector<std::unique_ptr<PipelineStage>> owned;
  std::vector<PipelineStage*> raw;
  for (int64_t s = 0; s < stages; ++s) {
    owned.push_back(std::make_unique<PipelineStage>(s, stages, *models[s],
                                                    s + 1 == stages ? &loss : nullptr, at::kCPU));
    raw.push_back(owned.back().get());
  }
  // The interleaved schedules' order for one rank holding every stage: forwards of later
  // microbatches run between a backward's input and weight parts.
  const std::vector<Action> order =
      distributed::pipeline::interleaved_order(1, stages, microbatches, split_backward)[0];
  const distributed::pipeline::StagePlacement placement{1, stages, false};
  const std::vector<Action> lowered =
      distributed::pipeline::lower_schedule({order}, placement, microbatches)[0];
  for (const Action& action : lowered)
    EXPECT_TRUE(action.is_compute() || action.type == ActionType::kReduceGrad);
  auto group = distributed::Group::solo("pp");
  ScheduleRunner runner(raw, placement, *group, {{1, 12, 32}, at::TensorOptions(at::kFloat)});
  const data::Batch all = batch();
  StepScale scale;
  scale.divisor = valid_token_count(all.labels).to(at::kFloat);
  scale.extra_scale = static_cast<double>(microbatches);
  for (auto& s : owned) s->begin(&scale);
  runner.run(lowered, split_microbatches(all, microbatches), {}, true);
  Result r;
  for (auto& s : owned) r.loss += s->take_loss().item<double>();
  for (auto& m : models) {
    for (auto& [name, p] : m->named_parameters()) {
      EXPECT_TRUE(p.grad().defined()) << name;
      auto it = r.grads.find(name);
      if (it == r.grads.end()) {
        r.grads[name] = p.grad();
      } else {
        it->second = it->second + p.grad();  // the tied table of the first and last stage
      }
    }
  }
  return r;
}

void expect_same(const Result& got, const Result& expected, const std::string& what) {
  EXPECT_NEAR(got.loss, expected.loss, 1e-6 * std::abs(expected.loss)) << what;
  ASSERT_EQ(got.grads.size(), expected.grads.size()) << what;
  for (const auto& [name, g] : expected.grads) {
    ASSERT_TRUE(got.grads.count(name)) << what << " " << name;
    const double scale = std::max(g.abs().max().item<double>(), 1e-12);
    EXPECT_LE((got.grads.at(name) - g).abs().max().item<double>() / scale, 1e-5)
        << what << " " << name;
  }
}

TEST(PipelineStage, StagesRunByTheScheduleEqualTheWholeModel) {
  for (bool moe : {false, true}) {
    const Qwen3Args a = tiny(moe);
    const Result expected = whole_model(a, 4);
    for (int64_t stages : {2, 3}) {
      for (bool split : {false, true}) {
        const std::string what = std::string(moe ? "moe " : "dense ") + std::to_string(stages) +
                                 " stages" + (split ? " I/W" : " B");
        expect_same(staged(a, stages, 4, split), expected, what);
      }
    }
  }
}

TEST(PipelineStage, MicrobatchesAreConsecutiveRows) {
  const data::Batch all = batch();
  const std::vector<data::Batch> parts = split_microbatches(all, 2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(at::equal(parts[1].inputs, all.inputs.narrow(0, 2, 2)));
  EXPECT_TRUE(at::equal(parts[0].labels, all.labels.narrow(0, 0, 2)));
  EXPECT_FALSE(parts[0].positions.defined());
}

}  // namespace
}  // namespace titan::train
