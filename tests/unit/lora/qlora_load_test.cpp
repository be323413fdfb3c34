// QLoRA's base arrives weight by weight (lora/lora_model.h, models/materialize.h): a model built
// on the meta device gets the same NF4 weights and adapters as one initialised whole and then
// quantised, while never holding more than about one projection at full precision; its counts
// come from the shapes.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "counting_allocator.h"
#include "titan/lora/lora_model.h"
#include "titan/models/common/lora.h"
#include "titan/models/qwen3/model.h"

namespace titan::lora {
namespace {

using titan::testing::CountingAllocator;

models::Qwen3Args many_layers() {
  models::Qwen3Args a;
  a.model_type = "qwen3";
  a.vocab_size = 64;
  a.hidden_size = 128;
  a.intermediate_size = 384;
  a.num_hidden_layers = 12;
  a.num_attention_heads = 4;
  a.num_key_value_heads = 2;
  a.head_dim = 32;
  return a;
}

std::unique_ptr<models::Qwen3Model> build(bool meta, uint64_t seed) {
  models::BuildOptions b;
  b.seed = seed;
  b.meta_parameters = meta;
  return std::make_unique<models::Qwen3Model>(many_layers(), models::Qwen3Options{}, b);
}

config::LoraConfig qlora() {
  config::LoraConfig c;
  c.rank = 4;
  c.base_quantization = "nf4";
  return c;
}

BaseWeights seeded(uint64_t seed) {
  BaseWeights w;
  w.seed = seed;
  return w;
}

TEST(QloraLoad, WeightByWeightGivesTheSameModelAsQuantisingTheWholeInitialisedBase) {
  for (bool double_quantization : {false, true}) {
    config::LoraConfig lora = qlora();
    lora.double_quantization = double_quantization;
    const BaseFingerprint base = fingerprint_seeded(3, nlohmann::json::object());
    auto whole = build(/*meta=*/false, 3);
    const LoraSetup a = apply_lora(*whole, lora, base, seeded(3), 11);
    auto streamed = build(/*meta=*/true, 3);
    const LoraSetup b = apply_lora(*streamed, lora, base, seeded(3), 11);
    EXPECT_EQ(a.nf4_bytes, b.nf4_bytes);
    EXPECT_EQ(a.base_bytes, b.base_bytes);
    EXPECT_EQ(a.frozen_parameters, b.frozen_parameters);
    EXPECT_EQ(a.trainable_parameters, b.trainable_parameters);
    const NamedTensors pa = whole->named_parameters(), pb = streamed->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].first, pb[i].first);
      EXPECT_TRUE(at::equal(pa[i].second, pb[i].second)) << pa[i].first;
      EXPECT_EQ(pa[i].second.requires_grad(), pb[i].second.requires_grad()) << pa[i].first;
    }
    const auto nf4 = whole->nf4_weights();
    ASSERT_EQ(nf4, streamed->nf4_weights());
    ASSERT_EQ(nf4.size(), 12u * 7u);
    for (const auto& [name, shape] : nf4)
      EXPECT_TRUE(at::equal(whole->dequantized_weight(name), streamed->dequantized_weight(name)))
          << name;
  }
}

TEST(QloraLoad, CountsComeFromShapesAndTheBaseIsNeverWholeAtFullPrecision) {
  // What the base holds, from a model that is shapes only.
  auto shapes = build(/*meta=*/true, 0);
  int64_t base_elements = 0, projection_bytes = 0, largest_block_bytes = 0, other_bytes = 0;
  std::map<std::string, int64_t> block_bytes;
  for (const auto& [name, p] : shapes->named_parameters()) {
    base_elements += p.numel();
    if (shapes->quantizable(name)) {
      projection_bytes += p.numel() * 4;
      const std::string block = name.substr(0, name.find('.', std::string("model.layers.").size()));
      largest_block_bytes = std::max(largest_block_bytes, block_bytes[block] += p.numel() * 4);
    } else {
      other_bytes += p.numel() * 4;
    }
  }
  const config::LoraConfig lora = qlora();
  int64_t adapter_elements = 0;  // A [r, in] and B [out, r] for every projection
  for (const auto& [name, p] : shapes->named_parameters())
    if (shapes->quantizable(name)) adapter_elements += lora.rank * (p.size(0) + p.size(1));

  CountingAllocator& counter = CountingAllocator::installed();
  auto model = build(/*meta=*/true, 0);
  counter.reset_peak();
  const int64_t before = counter.live();
  const LoraSetup setup = apply_lora(*model, lora, fingerprint_seeded(0, {}), seeded(0), 1);
  const int64_t peak = counter.peak() - before;

  EXPECT_EQ(setup.frozen_parameters, base_elements);
  EXPECT_EQ(setup.trainable_parameters, adapter_elements);
  // The projections at full precision would be 12 layers' worth; at most about one layer's is
  // alive at once, next to what stays (the unquantised weights, NF4 codes, adapters).
  const int64_t stays = other_bytes + setup.nf4_bytes + adapter_elements * 4;
  EXPECT_GE(peak, stays);  // (the allocator does count what the model keeps)
  EXPECT_LT(peak, stays + 2 * largest_block_bytes)
      << "peak " << peak << ", of which stays " << stays;
  EXPECT_LT(peak, stays + projection_bytes / 4);
}

}  // namespace
}  // namespace titan::lora
