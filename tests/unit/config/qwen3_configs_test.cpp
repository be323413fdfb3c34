// The built-in `qwen3` config functions: each resolves, validates, names a real flavor and
// prints to TOML that reads back to itself; fine-tunes and the default job keep their promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "config_test_util.h"
#include "source_dir.h"
#include "titan/common/installation.h"
#include "titan/config/config_fields.h"
#include "titan/config/resolve.h"
#include "titan/config/toml_overlay.h"
#include "titan/config/validate.h"
#include "titan/models/builtin_configs.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::config {
namespace {

using testing::flatten;

// A built-in default path as resolution leaves it: beside the installation when there is one
// (the folder holding assets/ above the test binary), else as the config function wrote it.
std::string builtin_path(const std::string& relative) {
  const std::string root = installation_root();
  return root.empty() ? relative : (std::filesystem::path(root) / relative).string();
}

const std::vector<std::string> kSizes = {"0_6b", "1_7b", "4b",      "8b",
                                         "14b",  "32b",  "30b_a3b", "235b_a22b"};

TrainerConfig resolve_builtin_in(const std::string& module, const std::string& name,
                                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--module", module, "--config", name};
  args.insert(args.end(), extra.begin(), extra.end());
  return resolve_config(args, models::builtin_resolve_options());
}

TrainerConfig resolve_builtin(const std::string& name, std::vector<std::string> extra = {}) {
  return resolve_builtin_in("qwen3", name, std::move(extra));
}

TEST(Qwen3Configs, ModelNameIsCheckedAgainstTheModelRegistry) {
  try {
    resolve_builtin("qwen3_debugmodel", {"--model.name", "llama"});
    FAIL() << "no error";
  } catch (const titan::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("model.name = \"llama\": accepted values are llama3, qwen3"),
        std::string::npos)
        << e.what();
  }
}

TEST(Qwen3Configs, RegistersEveryPromisedFunction) {
  const auto& registry = models::builtin_config_registry();
  std::vector<std::string> expected = {"qwen3_debugmodel",
                                       "qwen3_debugmodel_moe",
                                       "qwen3_debugmodel_default_job",
                                       "titan_kernels_qwen3",
                                       "titan_kernels_qwen3_debugmodel",
                                       "qwen3_debugmodel_sft",
                                       "qwen3_0_6b_sft",
                                       "qwen3_30b_a3b_ep8",
                                       "qwen3_8b_tp2",
                                       "qwen3_debugmodel_moe_ep2",
                                       "qwen3_debugmodel_tp2",
                                       "qwen3_0_6b_lora",
                                       "qwen3_0_6b_qlora",
                                       "qwen3_0_6b_sft_lora",
                                       "qwen3_debugmodel_lora",
                                       "qwen3_debugmodel_qlora",
                                       "qwen3_debugmodel_sft_lora"};
  for (const auto& size : kSizes) {
    expected.push_back("qwen3_" + size);
    expected.push_back("qwen3_" + size + "_finetune");
  }
  std::vector<std::string> registered;
  for (const auto& fn : registry.functions("qwen3")) {
    registered.push_back(fn.name);
    EXPECT_FALSE(fn.description.empty()) << fn.name;
  }
  std::sort(expected.begin(), expected.end());
  std::sort(registered.begin(), registered.end());
  EXPECT_EQ(registered, expected);
  // Registration runs once however often the accessor is called.
  EXPECT_EQ(&models::builtin_config_registry(), &registry);
  EXPECT_EQ(registry.functions("qwen3").size(), expected.size());
}

TEST(Qwen3Configs, ParallelFunctionsSetTheirDegrees) {
  const TrainerConfig ep = resolve_builtin("qwen3_30b_a3b_ep8");
  EXPECT_EQ(ep.parallelism.expert_parallel_degree, 8);
  EXPECT_EQ(ep.model.flavor, "30B-A3B");
  EXPECT_EQ(ep.parallelism.data_parallel_shard_degree, -1);
  const TrainerConfig tp = resolve_builtin("qwen3_8b_tp2");
  EXPECT_EQ(tp.parallelism.tensor_parallel_degree, 2);
  EXPECT_TRUE(tp.parallelism.enable_sequence_parallel);
  EXPECT_EQ(resolve_builtin("qwen3_debugmodel_moe_ep2").parallelism.expert_parallel_degree, 2);
  EXPECT_EQ(resolve_builtin("qwen3_debugmodel_tp2").parallelism.tensor_parallel_degree, 2);
}

// The recipe's three paths differ in the model and the kernels only, so their losses agree
// out of the box: the same MoE balancing, which the Transformers backend has too.
TEST(Qwen3Configs, TheThreeRecipePathsBalanceExpertsAlike) {
  const TrainerConfig full =
      resolve_builtin_in("transformers_modeling_backend", "transformers_modeling_backend_full");
  const TrainerConfig native = resolve_builtin_in("transformers_modeling_backend",
                                                  "transformers_modeling_backend_native_qwen3");
  const TrainerConfig kernels = resolve_builtin("titan_kernels_qwen3");
  EXPECT_EQ(full.model.moe_load_balancing, "aux_loss");
  EXPECT_EQ(native.model.moe_load_balancing, full.model.moe_load_balancing);
  EXPECT_EQ(kernels.model.moe_load_balancing, full.model.moe_load_balancing);
  EXPECT_EQ(kernels.model.router_aux_loss_coef, full.model.router_aux_loss_coef);
}

TEST(Qwen3Configs, SftFunctionsTrainChatsWithDocumentMasking) {
  for (const char* name : {"qwen3_debugmodel_sft", "qwen3_0_6b_sft"}) {
    SCOPED_TRACE(name);
    const config::TrainerConfig c = models::builtin_config_registry().make("qwen3", name);
    EXPECT_TRUE(c.training.sft);
    EXPECT_TRUE(c.training.document_masking);
    EXPECT_TRUE(c.training.shuffle);
  }
  const config::TrainerConfig c = models::builtin_config_registry().make("qwen3", "qwen3_0_6b_sft");
  EXPECT_TRUE(c.checkpoint.initial_load_in_hf);  // fine-tunes the published checkpoint
  EXPECT_EQ(c.model.flavor, "auto");             // whose config.json gives the dimensions
  EXPECT_EQ(c.model.hf_assets_path, "assets/hf/Qwen3-0.6B");
}

TEST(Qwen3Configs, LoraFunctionsAdaptAFrozenBase) {
  for (const char* name :
       {"qwen3_0_6b_lora", "qwen3_0_6b_qlora", "qwen3_0_6b_sft_lora", "qwen3_debugmodel_lora",
        "qwen3_debugmodel_qlora", "qwen3_debugmodel_sft_lora"}) {
    SCOPED_TRACE(name);
    const TrainerConfig c = resolve_builtin(name);
    EXPECT_EQ(c.model.converters, std::vector<std::string>{"lora"});
    EXPECT_TRUE(c.lora.target_modules.empty());  // every projection
    EXPECT_EQ(c.lora.alpha, 2.0 * static_cast<double>(c.lora.rank));
    EXPECT_EQ(c.lora.base_quantization,
              std::string(name).find("qlora") != std::string::npos ? "nf4" : "none");
    EXPECT_EQ(c.job.dump_folder, std::string("./outputs/") + name);
  }
  EXPECT_TRUE(resolve_builtin("qwen3_0_6b_sft_lora").training.sft);
  EXPECT_TRUE(resolve_builtin("qwen3_debugmodel_sft_lora").training.sft);
  EXPECT_TRUE(resolve_builtin("qwen3_0_6b_lora").checkpoint.initial_load_in_hf);
}

TEST(Qwen3Configs, EachResolvesValidatesAndNamesARealFlavor) {
  const auto flavors = models::qwen3_flavor_names();
  for (const auto& fn : models::builtin_config_registry().functions("qwen3")) {
    SCOPED_TRACE(fn.name);
    const TrainerConfig c = resolve_builtin(fn.name);
    EXPECT_NO_THROW(validate_config(c));
    EXPECT_EQ(c.model.name, "qwen3");
    // Fine-tunes take the dimensions from the folder they fine-tune.
    const bool fine_tune = c.checkpoint.initial_load_in_hf;
    EXPECT_EQ(fine_tune, fn.name.ends_with("_finetune") || fn.name.starts_with("qwen3_0_6b_sft") ||
                             fn.name == "qwen3_0_6b_lora" || fn.name == "qwen3_0_6b_qlora");
    if (fine_tune)
      EXPECT_EQ(c.model.flavor, "auto");
    else
      EXPECT_NE(std::find(flavors.begin(), flavors.end(), c.model.flavor), flavors.end())
          << c.model.flavor;
    EXPECT_EQ(c.training.device, "auto");
    // Printed TOML is a config file that reproduces the config exactly.
    TrainerConfig reloaded;
    apply_toml_text(reloaded, to_toml(c), fn.name + ".toml");
    EXPECT_EQ(flatten(reloaded), flatten(c));
  }
}

// The third path: the native MoE with the fused kernels, the data-parallel setting of the
// Transformers-backend recipe, and reference where a kernel does not fit the device.
TEST(Qwen3Configs, KernelConfigsSelectTheFusedKernels) {
  const TrainerConfig backend =
      resolve_builtin_in("transformers_modeling_backend", "transformers_modeling_backend_full");
  for (const char* name : {"titan_kernels_qwen3", "titan_kernels_qwen3_debugmodel"}) {
    SCOPED_TRACE(name);
    const TrainerConfig c = resolve_builtin(name);
    EXPECT_TRUE(models::qwen3_flavor(c.model.flavor).is_moe());
    EXPECT_NE(
        std::find(c.overrides.imports.begin(), c.overrides.imports.end(), "moe_experts=fused"),
        c.overrides.imports.end());
    EXPECT_NE(std::find(c.overrides.imports.begin(), c.overrides.imports.end(), "rms_norm=fused"),
              c.overrides.imports.end());
    EXPECT_TRUE(c.overrides.fallback);
    EXPECT_EQ(c.parallelism.data_parallel_shard_degree,
              backend.parallelism.data_parallel_shard_degree);
  }
  EXPECT_EQ(resolve_builtin("titan_kernels_qwen3").model.flavor, "30B-A3B");
  const TrainerConfig debug = resolve_builtin("titan_kernels_qwen3_debugmodel");
  const TrainerConfig plain = resolve_builtin("qwen3_debugmodel_moe");
  EXPECT_EQ(debug.model.flavor, plain.model.flavor);
  EXPECT_EQ(debug.model.moe_load_balancing, plain.model.moe_load_balancing);
}

TEST(Qwen3Configs, DebugModelsAreTinyWithTheRealVocabulary) {
  for (const char* name : {"qwen3_debugmodel", "qwen3_debugmodel_moe"}) {
    SCOPED_TRACE(name);
    const TrainerConfig c = resolve_builtin(name);
    const auto args = models::qwen3_flavor(c.model.flavor);
    EXPECT_EQ(args.vocab_size, 151936);
    EXPECT_LE(args.hidden_size, 512);
    EXPECT_EQ(c.training.steps, 20);
    EXPECT_GE(c.training.local_batch_size, 4);
    EXPECT_LE(c.training.local_batch_size, 8);
    EXPECT_EQ(c.training.seq_len, 256);
    EXPECT_EQ(c.optimizer.lr, 8e-4);
    EXPECT_EQ(c.lr_scheduler.warmup_steps, 2);
  }
  EXPECT_TRUE(models::qwen3_flavor(resolve_builtin("qwen3_debugmodel_moe").model.flavor).is_moe());
  EXPECT_FALSE(models::qwen3_flavor(resolve_builtin("qwen3_debugmodel").model.flavor).is_moe());
}

TEST(Qwen3Configs, FineTunesLoadAndExportHuggingFaceAtTheirSize) {
  for (const auto& size : kSizes) {
    SCOPED_TRACE(size);
    const TrainerConfig base = resolve_builtin("qwen3_" + size);
    const TrainerConfig ft = resolve_builtin("qwen3_" + size + "_finetune");
    EXPECT_EQ(ft.model.flavor, "auto");  // the size only picks the batch and AC
    EXPECT_EQ(ft.activation_checkpoint.mode, base.activation_checkpoint.mode);
    EXPECT_EQ(ft.training.local_batch_size, base.training.local_batch_size);
    EXPECT_TRUE(ft.checkpoint.initial_load_in_hf);
    EXPECT_TRUE(ft.checkpoint.last_save_in_hf);
    EXPECT_EQ(ft.checkpoint.export_dtype, "bfloat16");
    EXPECT_LT(ft.optimizer.lr, base.optimizer.lr / 5);
    EXPECT_EQ(ft.lr_scheduler.decay_type, "cosine");
    const double warmup_fraction =
        static_cast<double>(ft.lr_scheduler.warmup_steps) / ft.training.steps;
    EXPECT_GE(warmup_fraction, 0.01);
    EXPECT_LE(warmup_fraction, 0.05);
    EXPECT_EQ(ft.model.hf_assets_path, builtin_path("assets/hf/Qwen3-" + base.model.flavor));
    // Real sizes train long sequences.
    EXPECT_EQ(base.training.seq_len, 4096);
    EXPECT_FALSE(base.checkpoint.initial_load_in_hf);
  }
}

TEST(Qwen3Configs, DefaultJobUsesTheLocalCorpusAndTokenizer) {
  const TrainerConfig c = resolve_builtin("qwen3_debugmodel_default_job");
  EXPECT_EQ(c.model.flavor, "debugmodel");
  EXPECT_EQ(c.training.dataset_path, builtin_path("assets/corpus/python_stdlib.jsonl"));
  EXPECT_EQ(c.model.hf_assets_path, builtin_path("assets/qwen3-tokenizer"));
  EXPECT_TRUE(c.checkpoint.last_save_in_hf);
  EXPECT_EQ(c.metrics.log_freq, 10);
  // The assets are fetched and assembled at set-up; check them only where set-up has run.
  const std::filesystem::path root = ::titan::testing::source_dir();
  if (std::filesystem::exists(root / "assets/corpus")) {
    EXPECT_EQ(std::filesystem::canonical(installation_root()), std::filesystem::canonical(root));
    EXPECT_TRUE(std::filesystem::exists(c.training.dataset_path));
    EXPECT_TRUE(
        std::filesystem::exists(std::filesystem::path(c.model.hf_assets_path) / "tokenizer.json"));
  }
}

TEST(Qwen3Configs, OverridesApplyOnTopOfAFunction) {
  const TrainerConfig c = resolve_builtin(
      "qwen3_0_6b_finetune",
      {"--training.steps", "50", "--model.flavor", "auto", "--checkpoint.enable=false"});
  EXPECT_EQ(c.training.steps, 50);
  EXPECT_EQ(c.model.flavor, "auto");
  EXPECT_FALSE(c.checkpoint.enable);
  EXPECT_EQ(c.optimizer.lr, resolve_builtin("qwen3_0_6b_finetune").optimizer.lr);
}

}  // namespace
}  // namespace titan::config
