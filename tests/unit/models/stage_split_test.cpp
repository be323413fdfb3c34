// The pipeline split of a decoder (ModelSpec::pipeline, stage_parts.h): stages built apart
// from the same seed, run one after another as a pipeline runs them (each stage's input a leaf,
// its gradient handed back to the previous stage), give the whole model's loss and gradients.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <set>

#include "error_of.h"
#include "titan/models/common/decoder.h"
#include "titan/models/materialize.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/model.h"

namespace titan::models {
namespace {

using titan::testing::error_of;

Qwen3Args tiny(bool moe, bool tied) {
  Qwen3Args a;
  a.model_type = moe ? "qwen3_moe" : "qwen3";
  a.vocab_size = 97;
  a.hidden_size = 32;
  a.intermediate_size = 48;
  a.num_hidden_layers = 5;
  a.num_attention_heads = 4;
  a.num_key_value_heads = 2;
  a.head_dim = 8;
  a.tie_word_embeddings = tied;
  if (moe) {
    a.num_experts = 4;
    a.num_experts_per_tok = 2;
    a.moe_intermediate_size = 16;
    a.mlp_only_layers = {2};
  }
  return a;
}

Qwen3Options aux_loss() {
  Qwen3Options o;
  o.balancing = MoeBalancing::kAuxLoss;
  o.router_aux_loss_coef = 0.1;
  return o;
}

std::unique_ptr<Qwen3Model> whole(const Qwen3Args& a) {
  BuildOptions b;
  b.seed = 7;
  return std::make_unique<Qwen3Model>(a, aux_loss(), b);
}

// A stage as a pipeline rank builds it: shapes, the stage's parts kept, then its values.
std::unique_ptr<Qwen3Model> stage(const Qwen3Args& a, const StageParts& parts) {
  BuildOptions b;
  b.meta_parameters = true;
  auto model = std::make_unique<Qwen3Model>(a, aux_loss(), b);
  get_model_spec("qwen3").pipeline(*model, parts);
  MaterializeOptions where;
  materialize(*model, seeded_initialisation(*model, 7), where);
  return model;
}

struct Result {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;  // summed over the stages that hold a tensor
};

// The summed token cross-entropy through the model's head.
at::Tensor token_loss(Model& model, const at::Tensor& hidden, const at::Tensor& labels) {
  const at::Tensor logits = at::linear(hidden, model.output_weight().to(hidden.scalar_type()));
  return at::cross_entropy_loss(logits.flatten(0, 1).to(at::kFloat), labels.flatten(), {},
                                at::Reduction::Sum);
}

at::Tensor ids() { return at::arange(24, at::kLong).remainder(97).view({2, 12}); }
at::Tensor labels() { return (at::arange(24, at::kLong) * 7 + 3).remainder(97).view({2, 12}); }

Result run_whole(Qwen3Model& model) {
  const ModelOutput out = model.forward(ids());
  at::Tensor l = token_loss(model, out.hidden, labels());
  if (out.extra_loss.defined()) l = l + out.extra_loss;
  l.backward();
  Result r;
  r.loss = l.item<double>();
  for (auto& [name, p] : model.named_parameters()) r.grads[name] = p.grad().clone();
  return r;
}

Result run_stages(std::vector<std::unique_ptr<Qwen3Model>>& stages) {
  std::vector<at::Tensor> inputs, outputs;
  std::vector<StageOutput> stage_outputs;
  std::vector<at::Tensor> totals;  // what the stages carry, added up as a pipeline adds it
  for (size_t k = 0; k < stages.size(); ++k) {
    StageInput in;
    if (k == 0) {
      in.tokens = ids();
    } else {
      in.hidden = outputs.back().detach().requires_grad_(true);  // what a recv gives
    }
    inputs.push_back(in.hidden);
    StageOutput out = stages[k]->forward_stage(in);
    EXPECT_EQ(out.carried.size(), stages[k]->carried_shapes().size());
    for (size_t i = 0; i < out.carried.size(); ++i) {
      if (i < totals.size())
        totals[i] = totals[i] + out.carried[i];
      else
        totals.push_back(out.carried[i]);
    }
    outputs.push_back(out.hidden);
    stage_outputs.push_back(std::move(out));
  }
  Qwen3Model& last = *stages.back();
  // Each stage's part of the aux loss, given every stage's totals (as the schedule hands them).
  at::Tensor l = token_loss(last, outputs.back(), labels());
  for (const StageOutput& out : stage_outputs) {
    const at::Tensor aux = out.auxiliary ? out.auxiliary(totals) : at::Tensor();
    if (aux.defined()) l = l + aux;
  }
  // (The aux loss reaches back into every stage through its router logits, a path shared with
  // the hidden states': the graphs are kept for the stage-by-stage passes below, whose
  // gradients add up to the joint backward's.)
  l.backward({}, /*retain_graph=*/true);
  // Backward, stage by stage: each input's gradient is the previous stage's output gradient.
  for (size_t k = stages.size() - 1; k > 0; --k) {
    const at::Tensor grad = inputs[k].grad();
    EXPECT_TRUE(grad.defined()) << "stage " << k;
    if (grad.defined()) outputs[k - 1].backward(grad, /*retain_graph=*/true);
  }
  Result r;
  r.loss = l.item<double>();
  for (auto& s : stages) {
    for (auto& [name, p] : s->named_parameters()) {
      EXPECT_TRUE(p.grad().defined()) << name;
      if (!p.grad().defined()) continue;
      auto it = r.grads.find(name);
      if (it == r.grads.end())
        r.grads[name] = p.grad().clone();
      else
        it->second = it->second + p.grad();  // a tied table on the first and last stages
    }
  }
  return r;
}

TEST(StageSplit, StagesRunInTurnEqualTheWholeModelForwardAndBackward) {
  for (bool moe : {false, true}) {
    for (bool tied : {false, true}) {
      for (int64_t n : {2, 3}) {
        const Qwen3Args a = tiny(moe, tied);
        auto model = whole(a);
        const Result expected = run_whole(*model);
        std::vector<std::unique_ptr<Qwen3Model>> stages;
        for (const StageParts& parts : split_layers(a.num_hidden_layers, n))
          stages.push_back(stage(a, parts));
        const Result got = run_stages(stages);
        const std::string what = std::string(moe ? "moe" : "dense") + (tied ? " tied " : " ") +
                                 std::to_string(n) + " stages";
        EXPECT_NEAR(got.loss, expected.loss, 1e-5 * std::abs(expected.loss)) << what;
        ASSERT_EQ(got.grads.size(), expected.grads.size()) << what;
        for (const auto& [name, g] : expected.grads) {
          ASSERT_TRUE(got.grads.count(name)) << what << " " << name;
          const at::Tensor& h = got.grads.at(name);
          const double scale = std::max(g.abs().max().item<double>(), 1e-12);
          EXPECT_LE((h - g).abs().max().item<double>() / scale, 1e-5) << what << " " << name;
        }
      }
    }
  }
}

TEST(StageSplit, EachStageHoldsOnlyItsParts) {
  const Qwen3Args a = tiny(false, /*tied=*/true);
  const std::vector<StageParts> parts = split_layers(a.num_hidden_layers, 2);
  auto first = stage(a, parts[0]);
  auto last = stage(a, parts[1]);
  std::set<std::string> first_names, last_names;
  for (auto& [name, p] : first->named_parameters()) first_names.insert(name);
  for (auto& [name, p] : last->named_parameters()) last_names.insert(name);
  EXPECT_TRUE(first_names.count("model.embed_tokens.weight"));
  EXPECT_FALSE(first_names.count("model.norm.weight"));
  EXPECT_TRUE(last_names.count("model.norm.weight"));
  // Tied: the last stage holds the table too, as its head.
  EXPECT_TRUE(last_names.count("model.embed_tokens.weight"));
  for (const std::string& name : first_names) {
    if (name.starts_with("model.layers.")) {
      EXPECT_FALSE(last_names.count(name)) << name;
    }
  }
  EXPECT_EQ(first->blocks().size() + last->blocks().size(),
            static_cast<size_t>(a.num_hidden_layers));
}

TEST(StageSplit, LayersSplitAsAskedOrNamedErrors) {
  auto counts = [](const std::vector<StageParts>& parts) {
    std::vector<int64_t> out;
    for (const StageParts& p : parts) out.push_back(p.end_layer - p.first_layer);
    return out;
  };
  EXPECT_EQ(counts(split_layers(8, 4)), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(counts(split_layers(8, 3, 0, 1, 1)), (std::vector<int64_t>{2, 4, 2}));
  EXPECT_EQ(counts(split_layers(6, 3, 3, 1, 2)), (std::vector<int64_t>{2, 3, 1}));
  const std::string message = error_of([] { split_layers(7, 2, 3); });
  EXPECT_NE(message.find("hold 6 layers, but the model has 7"), std::string::npos) << message;
  EXPECT_NE(error_of([] { split_layers(1, 4); }).find("would hold no layer"), std::string::npos);
}

}  // namespace
}  // namespace titan::models
