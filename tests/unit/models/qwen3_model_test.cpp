// Structural tests of the native Qwen3 model: names and shapes, seeding, dtype handling,
// MoE balancing hooks, the state-dict adapter and the FLOPs counter. Numerical agreement
// with Hugging Face is tested in tests/integration/test_parity_native.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <map>
#include <set>

#include "titan/common/error.h"
#include "titan/models/generation.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/model.h"
#include "titan/models/qwen3/qwen3_spec.h"

namespace titan::models {
namespace {

Qwen3Args tiny(bool moe, bool tied) {
  Qwen3Args a;
  a.model_type = moe ? "qwen3_moe" : "qwen3";
  a.vocab_size = 97;
  a.hidden_size = 32;
  a.intermediate_size = 48;
  a.num_hidden_layers = 3;
  a.num_attention_heads = 6;
  a.num_key_value_heads = 2;
  a.head_dim = 8;
  a.tie_word_embeddings = tied;
  if (moe) {
    a.num_experts = 4;
    a.num_experts_per_tok = 2;
    a.moe_intermediate_size = 16;
    a.mlp_only_layers = {1};
  }
  return a;
}

std::unique_ptr<Qwen3Model> build(const Qwen3Args& a, uint64_t seed = 0, Qwen3Options options = {},
                                  at::ScalarType compute_dtype = at::kFloat) {
  BuildOptions b;
  b.seed = seed;
  b.compute_dtype = compute_dtype;
  return std::make_unique<Qwen3Model>(a, options, b);
}

at::Tensor some_ids(int64_t vocab) {
  return at::arange(20, at::kLong).remainder(vocab).view({2, 10});
}

TEST(Qwen3Model, ParameterNamesAndShapesFollowTransformersV5) {
  const Qwen3Args a = tiny(/*moe=*/true, /*tied=*/false);
  auto model = build(a);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<std::string> order;
  for (const auto& [name, t] : model->named_parameters()) {
    shapes[name] = t.sizes().vec();
    order.push_back(name);
    EXPECT_TRUE(t.requires_grad()) << name;
  }
  EXPECT_EQ(order.front(), "model.embed_tokens.weight");
  EXPECT_EQ(order.back(), "lm_head.weight");
  EXPECT_EQ(shapes["model.layers.0.self_attn.q_proj.weight"], (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.k_proj.weight"], (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.o_proj.weight"], (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.q_norm.weight"], (std::vector<int64_t>{8}));
  EXPECT_EQ(shapes["model.layers.0.mlp.experts.gate_up_proj"], (std::vector<int64_t>{4, 32, 32}));
  EXPECT_EQ(shapes["model.layers.0.mlp.experts.down_proj"], (std::vector<int64_t>{4, 32, 16}));
  EXPECT_EQ(shapes["model.layers.0.mlp.gate.weight"], (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(shapes["model.layers.1.mlp.gate_proj.weight"], (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(shapes.count("model.layers.1.mlp.gate.weight"), 0u);
}

TEST(Qwen3Model, TiedModelListsTheEmbeddingOnceAndUsesItAsHead) {
  auto model = build(tiny(false, true));
  for (const auto& [name, _] : model->named_parameters()) EXPECT_NE(name, "lm_head.weight");
  EXPECT_TRUE(model->output_weight().is_same(model->named_parameters().front().second));
}

TEST(Qwen3Model, InitIsSeededAndFollowsHfRules) {
  Qwen3Args a = tiny(true, false);
  a.pad_token_id = 5;
  auto m1 = build(a, 7), m2 = build(a, 7), m3 = build(a, 8);
  auto p1 = m1->named_parameters(), p2 = m2->named_parameters(), p3 = m3->named_parameters();
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_TRUE(at::equal(p1[i].second, p2[i].second)) << p1[i].first;
    const auto& t = p1[i].second;
    if (t.dim() == 1) {
      EXPECT_TRUE(at::equal(t, at::ones_like(t))) << p1[i].first;  // norms start at 1
    } else {
      EXPECT_FALSE(at::equal(t, p3[i].second)) << p1[i].first;
      EXPECT_NEAR(t.std().item<double>(), a.initializer_range, 0.3 * a.initializer_range)
          << p1[i].first;
    }
  }
  EXPECT_EQ(p1[0].second[5].abs().sum().item<double>(), 0.0);  // padding row zeroed
}

TEST(Qwen3Model, ForwardShapesAndLogitsAgree) {
  auto model = build(tiny(true, false));
  const at::Tensor ids = some_ids(97);
  const ModelOutput out = model->forward(ids);
  EXPECT_EQ(out.hidden.sizes(), (std::vector<int64_t>{2, 10, 32}));
  EXPECT_FALSE(out.extra_loss.defined());  // no balancing configured
  const at::Tensor l = logits(*model, ids);
  EXPECT_EQ(l.sizes(), (std::vector<int64_t>{2, 10, 97}));
  EXPECT_TRUE(at::allclose(l, at::linear(out.hidden, model->output_weight())));
}

TEST(Qwen3Model, ModulesCoverEveryParameterOnceInOrder) {
  auto model = build(tiny(true, false));
  std::vector<std::string> from_modules, paths;
  for (Module* m : model->modules()) {
    paths.push_back(m->path());
    for (const auto& [name, _] : m->named_parameters()) from_modules.push_back(name);
  }
  std::vector<std::string> all;
  for (const auto& [name, _] : model->named_parameters()) all.push_back(name);
  EXPECT_EQ(from_modules, all);
  EXPECT_EQ(paths, (std::vector<std::string>{"tok_embeddings", "layers.0", "layers.1", "layers.2",
                                             "norm"}));
  EXPECT_EQ(model->blocks().size(), 3u);
}

TEST(Qwen3Model, MovingKeepsTheParameterObjectsAnOptimizerHolds) {
  auto model = build(tiny(false, false));
  const NamedTensors before = model->named_parameters();
  move_model(*model, at::kCPU, at::kBFloat16);
  const NamedTensors after = model->named_parameters();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(before[i].second.is_same(after[i].second)) << before[i].first;
    EXPECT_EQ(before[i].second.scalar_type(), at::kBFloat16) << before[i].first;
    EXPECT_TRUE(before[i].second.requires_grad()) << before[i].first;
  }
}

TEST(Qwen3Model, CausalityLaterTokensDoNotChangeEarlierLogits) {
  auto model = build(tiny(true, true));
  at::Tensor ids = some_ids(97);
  const at::Tensor a = logits(*model, ids);
  ids.index_put_({at::indexing::Slice(), -1}, 3);
  const at::Tensor b = logits(*model, ids);
  EXPECT_TRUE(at::equal(a.slice(1, 0, 9), b.slice(1, 0, 9)));
  EXPECT_FALSE(at::equal(a.slice(1, 9), b.slice(1, 9)));
}

TEST(Qwen3Model, CachedDecodingMatchesTheFullForward) {
  for (bool moe : {false, true}) {
    auto model = build(tiny(moe, !moe), 2);
    const at::Tensor ids = some_ids(97);
    at::Tensor full;
    {
      at::NoGradGuard no_grad;
      full = logits(*model, ids);
    }
    IncrementalDecoder* decoder = model->incremental_decoder();
    ASSERT_NE(decoder, nullptr);
    KVCache cache;
    // A prompt of 4, a chunk of 3, then one token at a time.
    std::vector<at::Tensor> parts = {decoder->forward_cached(ids.slice(1, 0, 4), cache),
                                     decoder->forward_cached(ids.slice(1, 4, 7), cache)};
    for (int64_t t = 7; t < 10; ++t)
      parts.push_back(decoder->forward_cached(ids.slice(1, t, t + 1), cache));
    EXPECT_EQ(cache.length, 10);
    const at::Tensor cached = at::cat(parts, 1);
    EXPECT_TRUE(at::allclose(cached, full, 1e-5, 1e-5)) << (cached - full).abs().max();
  }
}

TEST(Qwen3Model, Bf16ComputeSendsGradientsToFloat32Parameters) {
  auto model = build(tiny(true, false), 0, {}, at::kBFloat16);
  const at::Tensor out = logits(*model, some_ids(97));
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  out.to(at::kFloat).pow(2).mean().backward();
  for (const auto& [name, p] : model->named_parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kFloat) << name;
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().scalar_type(), at::kFloat) << name;
  }
}

TEST(Qwen3Model, UnselectedExpertsGetExactlyZeroGradient) {
  Qwen3Args a = tiny(true, false);
  a.num_experts = 8;
  a.num_experts_per_tok = 1;
  auto model = build(a, 3);
  const at::Tensor ids = at::full({1, 2}, 4, at::kLong);  // two tokens: at most 2 experts per layer
  logits(*model, ids).pow(2).sum().backward();
  for (const auto& [name, p] : model->named_parameters()) {
    if (name != "model.layers.0.mlp.experts.gate_up_proj") continue;
    const at::Tensor per_expert = p.grad().abs().sum({1, 2});
    EXPECT_GE((per_expert == 0).sum().item<int64_t>(), 6) << per_expert;
    EXPECT_GE((per_expert > 0).sum().item<int64_t>(), 1) << per_expert;
  }
}

TEST(Qwen3Model, AuxLossIsScaledAndDifferentiable) {
  Qwen3Options o;
  o.balancing = MoeBalancing::kAuxLoss;
  o.router_aux_loss_coef = 0.5;
  auto model = build(tiny(true, false), 0, o);
  const at::Tensor aux = model->forward(some_ids(97)).extra_loss;
  ASSERT_TRUE(aux.defined());
  // Unscaled aux is >= k/E * E... at least positive; perfect balance gives k.
  EXPECT_GT(aux.item<double>(), 0.0);
  aux.backward();
  bool router_has_grad = false;
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.find("mlp.gate.weight") != std::string::npos && p.grad().defined()) {
      router_has_grad = router_has_grad || p.grad().abs().sum().item<double>() > 0;
    }
  }
  EXPECT_TRUE(router_has_grad);
}

TEST(Qwen3Model, ExpertBiasMovesTowardsUnderloadedExperts) {
  Qwen3Options o;
  o.balancing = MoeBalancing::kExpertBias;
  o.expert_bias_update_rate = 0.01;
  auto model = build(tiny(true, false), 0, o);
  ASSERT_EQ(model->named_buffers().size(), 2u);  // layers 0 and 2 are sparse
  // post_optimizer_build registers the update; the "optimizer" here is a list of hooks, and
  // the all-reduce doubles the counts as two identical ranks would.
  std::vector<std::function<void()>> hooks;
  OptimizerHooks optimizer_hooks;
  optimizer_hooks.add_step_post_hook = [&](std::function<void()> h) { hooks.push_back(h); };
  optimizer_hooks.all_reduce_sum = [](at::Tensor& t) { t.mul_(2); };
  get_model_spec("qwen3").post_optimizer_build(*model, optimizer_hooks);
  ASSERT_EQ(hooks.size(), 1u);
  {
    at::NoGradGuard no_grad;  // evaluation does not count
    model->forward(some_ids(97));
  }
  MoeLayer* sparse = model->layers()[0]->moe();
  ASSERT_NE(sparse, nullptr);
  EXPECT_EQ(sparse->tokens_per_expert().sum().item<double>(), 0.0);
  model->forward(some_ids(97));
  const at::Tensor load = sparse->tokens_per_expert().clone();
  EXPECT_EQ(load.sum().item<double>(), 20.0 * 2);  // every token picks k=2 experts
  hooks[0]();
  const at::Tensor bias = model->named_buffers()[0].second;
  const at::Tensor summed = 2 * load;
  const at::Tensor expected = 0.01 * at::sign(summed.mean() - summed);
  EXPECT_TRUE(at::allclose(bias, expected - expected.mean()));
  EXPECT_EQ(sparse->tokens_per_expert().sum().item<double>(), 0.0);
}

TEST(Qwen3Model, AdapterRoundTripsBothExpertLayouts) {
  const ModelSpec& spec = get_model_spec("qwen3");
  for (bool tied : {false, true}) {
    auto model = build(tiny(true, tied), 1);
    const NamedTensors native = model->named_parameters();
    const NamedTensors hf = spec.adapter.to_hf(native);
    std::map<std::string, at::Tensor> by_name(hf.begin(), hf.end());
    EXPECT_EQ(by_name.count("lm_head.weight"), tied ? 0u : 1u);
    ASSERT_EQ(by_name.count("model.layers.0.mlp.experts.3.down_proj.weight"), 1u);
    EXPECT_EQ(by_name.count("model.layers.0.mlp.experts.gate_up_proj"), 0u);
    // gate rows first
    EXPECT_TRUE(at::equal(by_name["model.layers.0.mlp.experts.2.up_proj.weight"],
                          native[7].second[2].slice(0, 16)));
    std::vector<std::string> keys;
    for (const auto& [k, _] : hf) keys.push_back(k);
    auto read = [&](const std::string& k) { return by_name.at(k); };
    const LazyTensors back = spec.adapter.from_hf(keys, read, native);
    ASSERT_EQ(back.size(), native.size());
    for (size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i].first, native[i].first);
      const LazyTensor& lazy = back[i].second;
      EXPECT_EQ(lazy.preview.sizes(), native[i].second.sizes()) << back[i].first;
      // A stack assembled from per-expert tensors is read only when asked for.
      EXPECT_EQ(lazy.preview.is_meta(), back[i].first.find(".experts.") != std::string::npos)
          << back[i].first;
      EXPECT_TRUE(at::equal(lazy.read(), native[i].second)) << back[i].first;
    }
    // The fused layout loads as-is.
    std::vector<std::string> fused_keys;
    std::map<std::string, at::Tensor> fused(native.begin(), native.end());
    for (const auto& [k, _] : native) fused_keys.push_back(k);
    const LazyTensors back2 = spec.adapter.from_hf(
        fused_keys, [&](const std::string& k) { return fused.at(k); }, native);
    EXPECT_EQ(back2.size(), native.size());
  }
}

std::string load_error(const std::vector<std::string>& keys,
                       const std::map<std::string, at::Tensor>& tensors,
                       const NamedTensors& native) {
  try {
    get_model_spec("qwen3").adapter.from_hf(
        keys, [&](const std::string& k) { return tensors.at(k); }, native);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Qwen3Model, AdapterNamesMissingUnexpectedAndMisshapedTensors) {
  auto model = build(tiny(true, false), 1);
  const NamedTensors native = model->named_parameters();
  const NamedTensors hf = get_model_spec("qwen3").adapter.to_hf(native);
  std::map<std::string, at::Tensor> tensors(hf.begin(), hf.end());
  auto keys_of = [](const std::map<std::string, at::Tensor>& m) {
    std::vector<std::string> k;
    for (const auto& [name, _] : m) k.push_back(name);
    return k;
  };
  auto missing = tensors;
  missing.erase("model.layers.2.mlp.experts.1.up_proj.weight");
  std::string msg = load_error(keys_of(missing), missing, native);
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.2.mlp.experts.1.up_proj.weight"), std::string::npos) << msg;

  auto extra = tensors;
  extra["model.layers.9.foo.weight"] = at::zeros({2});
  msg = load_error(keys_of(extra), extra, native);
  EXPECT_NE(msg.find("unexpected"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.9.foo.weight"), std::string::npos) << msg;

  auto shape = tensors;
  shape["model.norm.weight"] = at::zeros({31});
  msg = load_error(keys_of(shape), shape, native);
  EXPECT_NE(msg.find("model.norm.weight is [31], expected [32]"), std::string::npos) << msg;
}

TEST(Qwen3Model, TiedCheckpointMayCarryAnIdenticalHeadButNotADifferentOne) {
  auto model = build(tiny(false, true), 1);
  const NamedTensors native = model->named_parameters();
  std::map<std::string, at::Tensor> tensors(native.begin(), native.end());
  tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone();
  std::vector<std::string> keys;
  for (const auto& [k, _] : tensors) keys.push_back(k);
  EXPECT_EQ(load_error(keys, tensors, native), "");
  tensors["lm_head.weight"] = tensors["lm_head.weight"] + 1;
  const std::string msg = load_error(keys, tensors, native);
  EXPECT_NE(msg.find("lm_head.weight differs"), std::string::npos) << msg;
}

// Hand-derived parameter counts (docs/qwen3.md section 7) against the counter, which works
// from the built tensors' shapes.
double formula_flops(const Qwen3Args& a, int64_t seq) {
  const double H = a.hidden_size, d = a.head_dim, nq = a.num_attention_heads,
               nkv = a.num_key_value_heads, V = a.vocab_size;
  double active = H * V + H;  // head (or tied embedding) + final norm
  for (int64_t i = 0; i < a.num_hidden_layers; ++i) {
    active += H * d * (2 * nq + 2 * nkv) + 2 * d + 2 * H;  // attention, q/k norms, layer norms
    if (a.attention_bias) active += nq * d + 2 * nkv * d + H;
    if (a.is_sparse_layer(i)) {
      active += 3.0 * H * a.moe_intermediate_size * a.num_experts_per_tok + H * a.num_experts;
    } else {
      active += 3.0 * H * a.intermediate_size;
    }
  }
  return 6 * active + 12.0 * a.num_hidden_layers * nq * d * seq;
}

TEST(Qwen3Flops, CounterMatchesTheFormulaOnBuiltModels) {
  for (bool moe : {false, true}) {
    for (bool tied : {false, true}) {
      Qwen3Args a = tiny(moe, tied);
      a.attention_bias = tied;
      auto model = build(a);
      const double counted = get_model_spec("qwen3").flops_per_token(*model, 64);
      EXPECT_NEAR(counted, formula_flops(a, 64), 1e-6 * counted) << moe << tied;
    }
  }
  // Sanity against the spec's worked value for 0.6B at T=4096 (6.4 GFLOP/token).
  EXPECT_NEAR(formula_flops(qwen3_flavor("0.6B"), 4096) / 1e9, 6.4, 0.05);
}

}  // namespace
}  // namespace titan::models
