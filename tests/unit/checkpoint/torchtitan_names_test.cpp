// torchtitan's names and layouts against titan's: the fused wqkv rows and Llama 3's q/k pairs
// go there and back, and the interleaving is the one torchtitan's FusedQKVLinear documents.
// torchtitan itself reading and writing these is tests/integration/test_torchtitan_checkpoints.py.
#include <gtest/gtest.h>

#include "titan/checkpoint/torchtitan_names.h"

namespace titan::checkpoint {
namespace {

TorchtitanModel model(bool llama) {
  TorchtitanModel m;
  m.llama = llama;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 4;
  return m;
}

const std::string kQ = "model.layers.3.self_attn.q_proj.weight";
const std::string kK = "model.layers.3.self_attn.k_proj.weight";
const std::string kV = "model.layers.3.self_attn.v_proj.weight";

TEST(TorchtitanNames, FusedQkvInterleavesPerKeyValueHeadAndComesBack) {
  const TorchtitanModel m = model(false);
  const at::Tensor q = at::arange(16 * 3, at::kFloat).reshape({16, 3});
  const at::Tensor k = 100 + at::arange(8 * 3, at::kFloat).reshape({8, 3});
  const at::Tensor v = 200 + at::arange(8 * 3, at::kFloat).reshape({8, 3});
  const NamedTensors fused = to_torchtitan_params({{kQ, q}, {kK, k}, {kV, v}}, m);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0].first, "layers.3.attention.qkv_linear.wqkv.weight");
  const at::Tensor w = fused[0].second;
  ASSERT_EQ(w.sizes(), (at::IntArrayRef{32, 3}));
  // Per kv head: its 2 query heads, then its key, then its value (head_dim rows each).
  EXPECT_TRUE(at::equal(w.slice(0, 0, 8), q.slice(0, 0, 8)));
  EXPECT_TRUE(at::equal(w.slice(0, 8, 12), k.slice(0, 0, 4)));
  EXPECT_TRUE(at::equal(w.slice(0, 12, 16), v.slice(0, 0, 4)));
  EXPECT_TRUE(at::equal(w.slice(0, 16, 24), q.slice(0, 8, 16)));
  for (const auto& [name, part] : {std::pair{kQ, q}, {kK, k}, {kV, v}}) {
    const auto source = torchtitan_param_source(name, m, /*fused_qkv=*/true);
    ASSERT_TRUE(source);
    EXPECT_TRUE(at::equal(from_torchtitan(*source, {w}, m), part)) << name;
  }
}

TEST(TorchtitanNames, LlamaRotaryPairsAreRepairedBothWays) {
  const TorchtitanModel m = model(true);
  const at::Tensor q = at::randn({16, 3});
  const NamedTensors saved = to_torchtitan_model({{kQ, q}}, m, false);
  ASSERT_EQ(saved[0].first, "layers.3.attention.qkv_linear.wq.weight");
  // torchtitan's rows of a head: (0, 2), (1, 3) of titan's half split, interleaved.
  EXPECT_TRUE(at::equal(saved[0].second[1], q[2]));
  EXPECT_TRUE(at::equal(saved[0].second[2], q[1]));
  const auto source = torchtitan_model_source(kQ, m);
  EXPECT_TRUE(at::equal(from_torchtitan(*source, {saved[0].second}, m), q));
  // Qwen3 keeps the half split: nothing moves.
  EXPECT_TRUE(at::equal(to_torchtitan_model({{kQ, q}}, model(false), false)[0].second, q));
}

TEST(TorchtitanNames, ExpertStacksSplitIntoW1AndW3) {
  const TorchtitanModel m = model(false);
  const at::Tensor gate_up = at::randn({2, 6, 3});
  const std::string name = "model.layers.0.mlp.experts.gate_up_proj";
  const NamedTensors saved = to_torchtitan_model({{name, gate_up}}, m, false);
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].first, "layers.0.moe.routed_experts.inner_experts.w1_EFD");
  EXPECT_TRUE(at::equal(saved[1].second, gate_up.slice(1, 3)));
  const auto source = torchtitan_model_source(name, m);
  EXPECT_TRUE(at::equal(from_torchtitan(*source, {saved[0].second, saved[1].second}, m), gate_up));
  const NamedTensors tied = to_torchtitan_model({{"model.embed_tokens.weight", gate_up}}, m, true);
  ASSERT_EQ(tied.size(), 2u);  // torchtitan's tied models save the head too
  EXPECT_EQ(tied[1].first, "lm_head.weight");
}

}  // namespace
}  // namespace titan::checkpoint
