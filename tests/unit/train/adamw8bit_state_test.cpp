// AdamW8bit in the optimizer: which parameters get 8-bit states, exact resume, conversions
// from and to AdamW's float32 moments, and where the per-block absmax lies when parallelism
// splits a parameter (block_layout.h). The numerics against bitsandbytes are in
// tests/integration/test_adamw8bit_peer.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "titan/common/error.h"
#include "titan/kernels/blockwise_8bit.h"
#include "titan/train/block_layout.h"
#include "titan/train/optimizer.h"
#include "titan/train/optimizer_state_names.h"

namespace titan::train {
namespace {

config::OptimizerConfig eight_bit(const std::string& impl = "fused") {
  config::OptimizerConfig cfg;
  cfg.name = "AdamW8bit";
  cfg.implementation = impl;
  return cfg;
}

NamedTensors make_params() {
  at::manual_seed(0);
  return {{"embed", at::randn({70, 64}).requires_grad_(true)},     // 4480: 8-bit, ragged
          {"proj", at::randn({63, 65}).requires_grad_(true)},      // 4095: float32
          {"norm.weight", at::randn({64}).requires_grad_(true)}};  // float32
}

void set_grads(NamedTensors& params, int seed) {
  at::manual_seed(seed);
  for (auto& [name, p] : params) p.mutable_grad() = at::randn_like(p);
}

NamedTensors copies(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.detach().clone());
  return out;
}

std::map<std::string, at::Tensor> by_name(const NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

TEST(AdamW8bitState, EightBitStatesFromMin8bitSizeOnAndTheirSavedNames) {
  NamedTensors params = make_params();
  AdamW opt(params, eight_bit());
  EXPECT_TRUE(opt.eight_bit(0));
  EXPECT_FALSE(opt.eight_bit(1));
  EXPECT_FALSE(opt.eight_bit(2));
  set_grads(params, 1);
  opt.step(1e-2);
  const auto state = by_name(opt.state());
  EXPECT_EQ(state.at("embed.exp_avg_codes").scalar_type(), at::kByte);
  EXPECT_EQ(state.at("embed.exp_avg_codes").sizes(), params[0].second.sizes());
  // 64 columns are not whole blocks: the absmax is flat, ceil(4480 / 256) = 18 blocks.
  EXPECT_EQ(state.at("embed.exp_avg_sq_absmax").sizes(), (std::vector<int64_t>{18}));
  EXPECT_EQ(state.at("proj.exp_avg").scalar_type(), at::kFloat);
  EXPECT_EQ(state.at("norm.weight.step").item<float>(), 1.0f);
  EXPECT_EQ(state.size(), 5u + 3u + 3u);
  // The memory the states take: 2 bytes and 2 float32 scales per block, 8 bytes below.
  EXPECT_EQ(opt.state_bytes(), 2.0 * 4480 + 8.0 * 18 + 8.0 * 4095 + 8.0 * 64);
}

TEST(AdamW8bitState, ResumeFromSavedStateContinuesIdentically) {
  for (const std::string impl : {"fused", "for-loop"}) {
    NamedTensors a = make_params();
    AdamW opt_a(a, eight_bit(impl));
    set_grads(a, 1);
    opt_a.step(1e-2);
    NamedTensors b = copies(a);
    for (auto& [name, p] : b) p.requires_grad_(true);
    AdamW opt_b(b, eight_bit(impl));
    opt_b.load_state(copies(opt_a.state()));
    EXPECT_EQ(opt_b.conversions().quantized + opt_b.conversions().dequantized, 0);
    for (int seed : {2, 3}) {
      set_grads(a, seed);
      set_grads(b, seed);
      opt_a.step(5e-3);
      opt_b.step(5e-3);
    }
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << impl << " " << a[i].first;
    const auto sa = by_name(opt_a.state()), sb = by_name(opt_b.state());
    for (const auto& [key, t] : sa) EXPECT_TRUE(at::equal(t, sb.at(key))) << impl << " " << key;
  }
}

TEST(AdamW8bitState, AdamWMomentsAreQuantisedAndBackAgain) {
  NamedTensors params = make_params();
  AdamW adamw(params, config::OptimizerConfig{});
  set_grads(params, 1);
  adamw.step(1e-2);
  const auto saved = by_name(adamw.state());

  NamedTensors q = copies(params);
  AdamW opt(q, eight_bit());
  opt.load_state(copies(adamw.state()));
  EXPECT_EQ(opt.conversions().quantized, 1);  // embed; the small ones stay float32
  ASSERT_TRUE(opt.conversion_warning().has_value());
  EXPECT_NE(opt.conversion_warning()->find("quantised"), std::string::npos);
  const auto state = by_name(opt.state());
  const kernels::BlockwiseQuantized want =
      kernels::quantize_blockwise(saved.at("embed.exp_avg"), /*is_signed=*/true);
  EXPECT_TRUE(at::equal(state.at("embed.exp_avg_codes"), want.codes));
  EXPECT_TRUE(at::equal(state.at("embed.exp_avg_absmax"), want.absmax));
  EXPECT_TRUE(at::equal(state.at("proj.exp_avg"), saved.at("proj.exp_avg")));
  EXPECT_TRUE(at::equal(state.at("embed.step"), saved.at("embed.step")));

  // And back: AdamW reads the 8-bit moments dequantised.
  NamedTensors r = copies(params);
  AdamW back(r, config::OptimizerConfig{});
  back.load_state(copies(opt.state()));
  EXPECT_EQ(back.conversions().dequantized, 1);
  const auto restored = by_name(back.state());
  EXPECT_TRUE(at::equal(restored.at("embed.exp_avg"),
                        kernels::dequantize_blockwise(want.codes, want.absmax, true)));
  // 8-bit moments come back within the map's spacing (here ~1/16 of each block's absmax).
  EXPECT_LE(
      (restored.at("embed.exp_avg_sq") - saved.at("embed.exp_avg_sq")).abs().max().item<double>(),
      saved.at("embed.exp_avg_sq").abs().max().item<double>() / 16);
}

TEST(AdamW8bitState, BadEightBitStateNamesTheTensor) {
  NamedTensors params = make_params();
  AdamW opt(params, eight_bit());
  const at::Tensor step = at::ones({}, at::kFloat);
  try {
    opt.load_state({{"embed.exp_avg_codes", at::zeros({70, 64}, at::kByte)},
                    {"embed.exp_avg_absmax", at::zeros({17})},
                    {"embed.exp_avg_sq_codes", at::zeros({70, 64}, at::kByte)},
                    {"embed.exp_avg_sq_absmax", at::zeros({18})},
                    {"embed.step", step}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'embed.exp_avg_absmax' has 17 values"), std::string::npos)
        << e.what();
  }
  try {
    opt.load_state({{"embed.exp_avg_codes", at::zeros({70, 64}, at::kByte)}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'embed.exp_avg_absmax' is missing"), std::string::npos)
        << e.what();
  }
}

TensorPlacement shard(std::vector<int64_t> shape, std::vector<std::pair<int64_t, int64_t>> splits,
                      int64_t index = 0) {
  static const char* const kMeshDims[] = {"tp", "dp_shard", "ep"};
  TensorPlacement p{std::move(shape), {}};
  for (size_t k = 0; k < splits.size(); ++k)
    p.on.push_back({kMeshDims[k], splits[k].second, index % splits[k].second,
                    Placement::shard(splits[k].first)});
  return p;
}

TEST(BlockLayout, PiecesOfWholeBlocksOnly) {
  // By rows (the last dimension is whole blocks): any split of dim 0, and splits of the last
  // one that fall on blocks.
  const auto rows = absmax_placement(shard({151936, 1024}, {{0, 3}}));
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->global_shape, (std::vector<int64_t>{151936, 4}));
  EXPECT_TRUE(absmax_placement(shard({2048, 6144}, {{1, 2}, {0, 4}})).has_value());
  EXPECT_FALSE(absmax_placement(shard({2048, 768}, {{1, 2}})).has_value());  // 384: 1.5 blocks
  // Flat: splits of dim 0 whose pieces start on blocks.
  const auto flat = absmax_placement(shard({151936, 64}, {{0, 2}}));
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->global_shape, (std::vector<int64_t>{37984}));
  EXPECT_TRUE(absmax_placement(shard({96, 64}, {{0, 2}})).has_value());
  EXPECT_FALSE(absmax_placement(shard({64, 96}, {{0, 3}})).has_value());  // 22 rows of 96
  EXPECT_FALSE(absmax_placement(shard({64, 96}, {{1, 2}})).has_value());
  // The last piece may end in the whole tensor's ragged tail: 4 + 3 rows of 64 (256 + 192).
  EXPECT_TRUE(absmax_placement(shard({7, 64}, {{0, 2}})).has_value());
  EXPECT_FALSE(absmax_placement(shard({100, 64}, {{0, 2}})).has_value());  // 3200 = 12.5 blocks
  // Every rank sees the same answer.
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_FALSE(absmax_placement(shard({64, 96}, {{0, 3}}, r)).has_value()) << r;
}

TEST(BlockLayout, OptimizerKeepsFloat32WhereBlocksWouldBeCut) {
  distributed::ParameterPlacements placements;
  placements.set("embed", shard({70 * 3, 64}, {{0, 3}}));  // 70 rows of 64 each: 4480, cut
  NamedTensors params = {{"embed", at::randn({70, 64}).requires_grad_(true)}};
  AdamW opt(params, eight_bit(), &placements);
  EXPECT_FALSE(opt.eight_bit(0));
  EXPECT_EQ(opt.float32_by_layout(), std::vector<std::string>{"embed"});
}

}  // namespace
}  // namespace titan::train
