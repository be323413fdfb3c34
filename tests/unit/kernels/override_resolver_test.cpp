// The kernel registry and the override resolver: entry syntax, glob matching, the choice per
// call site, conflicts, unknown names, unsupported devices (error, or fallback) and summaries.
// Each test uses its own KernelRegistry (with the built-ins) so that nothing leaks between them.
#include <gtest/gtest.h>

#include "../error_of.h"
#include "titan/common/error.h"
#include "titan/kernels/override_resolver.h"
#include "titan/kernels/reference/reference.h"
#include "titan/kernels/registry.h"

namespace titan::kernels {
namespace {

at::Tensor doubled_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return 2 * reference::rms_norm(x, w, eps);
}
bool cuda_only(at::DeviceType device, at::ScalarType) { return device == at::kCUDA; }
bool float32_only(at::DeviceType, at::ScalarType dtype) { return dtype == at::kFloat; }

// A registry with two extra rms_norm implementations: "doubled" (anywhere) and "gpu" (CUDA).
std::unique_ptr<KernelRegistry> test_registry() {
  auto registry = std::make_unique<KernelRegistry>();
  registry->add({"doubled", "test", "2x reference", RmsNormFn{&doubled_rms_norm}, nullptr});
  registry->add({"gpu", "test", "CUDA only", RmsNormFn{&doubled_rms_norm}, &cuda_only});
  registry->add({"fp32", "test", "float32 only", RmsNormFn{&doubled_rms_norm}, &float32_only});
  return registry;
}

OverrideSettings settings(std::vector<std::string> imports, bool fallback = false,
                          at::ScalarType dtype = at::kFloat) {
  OverrideSettings s;
  s.imports = std::move(imports);
  s.fallback = fallback;
  s.device = at::kCPU;
  s.dtype = dtype;
  return s;
}

using titan::testing::error_of;

TEST(KernelRegistry, EveryOpHasAReferenceImplementation) {
  KernelRegistry registry;
  for (size_t i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    EXPECT_EQ(registry.names(op).front(), "reference") << op_name(op);
    EXPECT_EQ(registry.get(op, "reference").op(), op);
  }
}

TEST(KernelRegistry, UnknownNamesAndDuplicatesAreErrors) {
  auto registry = test_registry();
  const std::string unknown = error_of([&] { registry->get(Op::kRmsNorm, "fast"); });
  EXPECT_NE(unknown.find("'fast'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("reference, fused, doubled, gpu"), std::string::npos) << unknown;
  const std::string duplicate = error_of([&] {
    registry->add({"doubled", "again", "", RmsNormFn{&doubled_rms_norm}, nullptr});
  });
  EXPECT_NE(duplicate.find("already registered by test"), std::string::npos) << duplicate;
  EXPECT_NE(error_of([&] { op_from_name("layernorm", "here"); }).find("rms_norm, rope"),
            std::string::npos);
}

TEST(KernelRegistry, LibraryThatIsNotAKernelLibraryIsRefused) {
  KernelRegistry registry;
  EXPECT_NE(error_of([&] { registry.load_library("/nonexistent/libx.so"); }).find("no such file"),
            std::string::npos);
  // Any shared library without the entry points.
  const std::string e = error_of([&] { registry.load_library("/lib/x86_64-linux-gnu/libm.so.6"); });
  EXPECT_NE(e.find("is not a titan kernel library"), std::string::npos) << e;
}

TEST(OverrideEntries, ParseAndRejectMalformedOnes) {
  const OverrideEntry plain = parse_override_entry("moe_experts=fused");
  EXPECT_EQ(plain.op, Op::kMoeExperts);
  EXPECT_EQ(plain.implementation, "fused");
  EXPECT_EQ(plain.glob, "*");
  const OverrideEntry scoped = parse_override_entry("rms_norm=fast@layers.1.*");
  EXPECT_EQ(scoped.op, Op::kRmsNorm);
  EXPECT_EQ(scoped.implementation, "fast");
  EXPECT_EQ(scoped.glob, "layers.1.*");
  for (const std::string bad : {"rms_norm", "=x", "rms_norm=", "rms_norm=x@", "rmsnorm=x"}) {
    const std::string e = error_of([&] { parse_override_entry(bad); });
    EXPECT_NE(e.find("'" + bad + "'"), std::string::npos) << bad << ": " << e;
  }
}

TEST(OverrideEntries, GlobsMatchWholePathsAndStarCrossesDots) {
  EXPECT_TRUE(module_path_matches("layers.1.*", "layers.1.attention_norm"));
  EXPECT_TRUE(module_path_matches("layers.1.*", "layers.1.attention.q_norm"));
  EXPECT_FALSE(module_path_matches("layers.1.*", "layers.10.moe"));
  EXPECT_FALSE(module_path_matches("layers.1.*", "layers.1"));
  EXPECT_TRUE(module_path_matches("*", "norm"));
  EXPECT_TRUE(module_path_matches("layers.*.moe", "layers.12.moe"));
  EXPECT_TRUE(module_path_matches("*norm", "layers.3.attention.k_norm"));
  EXPECT_FALSE(module_path_matches("layers.*.moe", "layers.1.feed_forward"));
}

TEST(OverrideResolver, GlobReplacesOnlyTheLayersItNames) {
  auto registry = test_registry();
  OverrideResolver resolver(settings({"rms_norm=doubled@layers.1.*"}), *registry);
  EXPECT_EQ(resolver.resolve(Op::kRmsNorm, "layers.0.attention_norm").name, "reference");
  EXPECT_EQ(resolver.resolve(Op::kRmsNorm, "layers.1.attention_norm").name, "doubled");
  EXPECT_EQ(resolver.resolve(Op::kRmsNorm, "layers.1.attention.q_norm").name, "doubled");
  EXPECT_EQ(resolver.resolve(Op::kRmsNorm, "layers.10.attention_norm").name, "reference");
  EXPECT_EQ(resolver.resolve(Op::kRope, "layers.1.attention").name, "reference");
  EXPECT_EQ(resolver.resolve(Op::kRmsNorm, "norm").name, "reference");
  EXPECT_NO_THROW(resolver.finish());
  // The function handed to the model is the registered one.
  EXPECT_EQ(resolver.function<Op::kRmsNorm>("layers.1.ffn_norm"), &doubled_rms_norm);
  const auto lines = resolver.summary(/*include_reference=*/false);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "rms_norm: layers.1.attention_norm, layers.1.attention.q_norm, layers.1.ffn_norm -> "
            "doubled");
}

TEST(OverrideResolver, OverlappingEntriesOfOneOpAreAnErrorNamingBoth) {
  auto registry = test_registry();
  OverrideResolver resolver(
      settings({"rms_norm=doubled", "rms_norm=fp32@layers.1.*", "rope=reference@layers.1.*"}),
      *registry);
  EXPECT_EQ(resolver.resolve(Op::kRmsNorm, "layers.0.ffn_norm").name, "doubled");
  const std::string e = error_of([&] { resolver.resolve(Op::kRmsNorm, "layers.1.ffn_norm"); });
  EXPECT_NE(e.find("'rms_norm=doubled'"), std::string::npos) << e;
  EXPECT_NE(e.find("'rms_norm=fp32@layers.1.*'"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.1.ffn_norm"), std::string::npos) << e;
}

TEST(OverrideResolver, UnknownImplementationAndUnmatchedEntryAreErrors) {
  auto registry = test_registry();
  const std::string unknown =
      error_of([&] { OverrideResolver(settings({"swiglu=fastest"}), *registry); });
  EXPECT_NE(unknown.find("'swiglu=fastest'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("known: reference, fused"), std::string::npos) << unknown;

  OverrideResolver resolver(settings({"rms_norm=doubled@layers.7.*"}), *registry);
  resolver.resolve(Op::kRmsNorm, "layers.0.ffn_norm");
  const std::string unmatched = error_of([&] { resolver.finish(); });
  EXPECT_NE(unmatched.find("matches no call site"), std::string::npos) << unmatched;
  EXPECT_NE(unmatched.find("layers.0.ffn_norm"), std::string::npos) << unmatched;
}

TEST(OverrideResolver, UnsupportedDeviceIsAnErrorUnlessFallbackIsOn) {
  auto registry = test_registry();
  OverrideResolver strict(settings({"rms_norm=gpu"}), *registry);
  const std::string e = error_of([&] { strict.resolve(Op::kRmsNorm, "norm"); });
  EXPECT_NE(e.find("'gpu'"), std::string::npos) << e;
  EXPECT_NE(e.find("cpu"), std::string::npos) << e;
  EXPECT_NE(e.find("float32"), std::string::npos) << e;
  EXPECT_NE(e.find("override.fallback"), std::string::npos) << e;

  OverrideResolver lenient(settings({"rms_norm=gpu"}, /*fallback=*/true), *registry);
  EXPECT_EQ(lenient.resolve(Op::kRmsNorm, "norm").name, "reference");
  EXPECT_NO_THROW(lenient.finish());  // the entry did claim a call site

  // The dtype counts too.
  OverrideResolver bf16(settings({"rms_norm=fp32"}, false, at::kBFloat16), *registry);
  EXPECT_NE(error_of([&] { bf16.resolve(Op::kRmsNorm, "norm"); }).find("bfloat16"),
            std::string::npos);
}

TEST(OverrideResolver, NoEntriesMeansReferenceEverywhere) {
  OverrideResolver resolver;
  EXPECT_EQ(resolver.function<Op::kMoeExperts>("layers.0.moe"), &reference::moe_experts);
  EXPECT_EQ(resolver.function<Op::kCrossEntropy>("output"), &reference::cross_entropy);
  EXPECT_TRUE(resolver.summary(false).empty());
  const auto all = resolver.summary(true);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], "moe_experts: layers.0.moe -> reference");
}

// Unclaimed call sites take the op's default for the device and dtype: the fused
// cross-entropy on the CPU in float32 and bfloat16, reference elsewhere; an entry still picks
// reference, and a default is not logged as an override.
TEST(OverrideResolver, UnclaimedCallSitesTakeTheOpsDefault) {
  auto registry = test_registry();
  OverrideResolver cpu(settings({}), *registry);
  EXPECT_EQ(cpu.resolve(Op::kCrossEntropy, "output").name, "fused");
  EXPECT_EQ(cpu.resolve(Op::kRmsNorm, "norm").name, "reference");
  EXPECT_TRUE(cpu.summary(/*include_reference=*/false).empty());
  EXPECT_EQ(cpu.summary(/*include_reference=*/true)[0], "rms_norm: norm -> reference");
  EXPECT_EQ(cpu.summary(/*include_reference=*/true)[1], "cross_entropy: output -> fused");

  OverrideResolver bf16(settings({}, false, at::kBFloat16), *registry);
  EXPECT_EQ(bf16.resolve(Op::kCrossEntropy, "output").name, "fused");
  OverrideResolver half(settings({}, false, at::kHalf), *registry);
  EXPECT_EQ(half.resolve(Op::kCrossEntropy, "output").name, "reference");
  OverrideSettings on_cuda = settings({});
  on_cuda.device = at::kCUDA;
  OverrideResolver cuda(on_cuda, *registry);
  EXPECT_EQ(cuda.resolve(Op::kCrossEntropy, "output").name, "reference");

  OverrideResolver named(settings({"cross_entropy=reference"}), *registry);
  EXPECT_EQ(named.function<Op::kCrossEntropy>("output"), &reference::cross_entropy);
  OverrideSettings no_defaults = settings({});
  no_defaults.defaults = false;
  OverrideResolver plain(no_defaults, *registry);
  EXPECT_EQ(plain.resolve(Op::kCrossEntropy, "output").name, "reference");
  EXPECT_EQ(registry->default_for(Op::kCrossEntropy, at::kCPU, at::kFloat).name, "fused");
  EXPECT_EQ(registry->default_for(Op::kMoeExperts, at::kCPU, at::kFloat).name, "reference");
}

TEST(OverrideResolver, SummaryWritesNumberedSiblingsAsRanges) {
  OverrideResolver resolver;
  for (int i = 0; i < 4; ++i)
    resolver.resolve(Op::kRmsNorm, "layers." + std::to_string(i) + ".ffn_norm");
  resolver.resolve(Op::kRmsNorm, "layers.6.ffn_norm");
  resolver.resolve(Op::kRmsNorm, "norm");
  EXPECT_EQ(resolver.summary(true)[0], "rms_norm: layers.{0..3,6}.ffn_norm, norm -> reference");
}

}  // namespace
}  // namespace titan::kernels
