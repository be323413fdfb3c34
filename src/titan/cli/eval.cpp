// titan eval --model HF_DIR_OR_CHECKPOINT --data FILE [--seq-len N --steps K]; with --objective
// dpo, eval_preference.h
#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/eval_preference.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/common/heap_reuse.h"
#include "titan/config/derived_defaults.h"
#include "titan/data/chat_template.h"
#include "titan/data/data_loader.h"
#include "titan/data/setting_names.h"
#include "titan/data/token_documents.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/distributed/launch_env.h"
#include "titan/train/batch_loss.h"
#include "titan/train/loader_options.h"
#include "titan/train/loss.h"
#include "titan/train/precision.h"
#include "titan/train/report/run_warnings.h"

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan eval --model HF_DIR_OR_CHECKPOINT_OR_ADAPTER --data FILE [--seq-len 512] [--steps 8]
                  [--base HF_DIR]
                  [--batch-size 1] [--tokenizer DIR] [--eos-token "<|endoftext|>"] [--device auto|cpu|cuda]
                  [--text-field text] [--packing megatron|hf_flattening|torchtitan]
                  [--document-masking] [--sft] [--backend native|transformers]

Mean token loss of a model on a dataset (.jsonl with a "text" field, or .txt), packed exactly
as training packs it (documents joined by the eos token, windows of seq-len + 1 tokens, labels
shifted by one), over `steps` batches. Prints {"loss": mean token loss, "tokens": count}. Data
shorter than steps x batch-size x (seq-len + 1) tokens is evaluated once, to its end (a warning
gives the count), never repeated.
--packing packs as training.packing does (docs/from_torchtitan.md): megatron (the default, the
windows above), hf_flattening (the same windows, block-causal attention, positions restarting at
each document, the label that crosses into the next document ignored; --document-masking is the
same) or torchtitan (inputs and labels shifted within each document, block-causal).
--sft reads chat records ({"messages": [...]} or ShareGPT's "conversations") as training.sft
does: rendered with the tokenizer's chat template, only the assistant turns evaluated, and
packed as titan's SFT config functions train them (--packing hf_flattening unless given: each
conversation attends to itself only).
It runs in one process: under torchrun (WORLD_SIZE > 1) it stops with an error rather than
have every rank repeat the same evaluation.

titan eval --objective dpo --model DIR --reference DIR --data PAIRS [--batch-size 1]
           [--beta 0.1] [--loss-type sigmoid[,sft...]] [--max-length 1024]
           [--truncation-mode keep_start|keep_end]
The DPO loss of a model against a reference on every pair of a preference file, read and
tokenised as training.objective dpo reads it (docs/preference.md), with TRL's metrics. Prints
{"loss", "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
"logps/chosen", "logps/rejected", "pairs"}.
)";

// What one pass over `path` gives the rows, counted up to `limit`: its tokens (each document's
// ids and its eos), or its (input, label) pairs when packing shifts within documents.
int64_t units_up_to(const std::string& path, const std::shared_ptr<const data::Tokenizer>& tok,
                    const data::LoaderOptions& o, int64_t limit) {
  const std::unique_ptr<data::TokenDocuments> documents =
      data::open_token_documents(path, tok, o.eos_id, o.text_field, o.chat_template);
  int64_t units = 0;
  std::vector<int32_t> ids;
  std::vector<uint8_t> trainable;
  for (int64_t i = 0; i < documents->size() && units < limit; ++i) {
    documents->read_masked(i, ids, trainable);
    units += static_cast<int64_t>(ids.size()) - (o.shift_within_documents ? 1 : 0);
  }
  return std::min(units, limit);
}

}  // namespace

int run_eval(const Args& args) {
  if (wants_help(args)) {
    std::cout << kHelp;
    return 0;
  }
  // Every rank would evaluate the same batches: one process only.
  const distributed::LaunchEnv launch = distributed::launch_env_from_environment();
  TITAN_CHECK(
      !launch.multi_process(), "titan eval runs in one process, and this is rank ", launch.rank,
      " of ", launch.world_size,
      " (WORLD_SIZE): every rank would repeat the same evaluation; run it without torchrun");
  std::vector<std::string> value_flags = {
      "--model",     "--data",   "--seq-len",    "--steps",   "--batch-size", "--tokenizer",
      "--eos-token", "--device", "--text-field", "--packing", "--base",       "--backend"};
  value_flags.insert(value_flags.end(), dpo_eval_flags().begin(), dpo_eval_flags().end());
  const FlagParser flags(args, "eval", value_flags, {"--document-masking", "--sft"});
  const std::string objective = flags.get("--objective", "lm");
  TITAN_CHECK(objective == "lm" || objective == "dpo", "titan eval: --objective \"", objective,
              "\": accepted values are lm, dpo");
  // A flag of the other objective would be read by nothing: one error instead of a silent result.
  const std::vector<std::string> lm_only = {
      "--seq-len", "--steps",   "--eos-token",        "--text-field", "--packing",
      "--base",    "--backend", "--document-masking", "--sft"};
  const std::vector<std::string> dpo_only = {"--reference", "--beta", "--loss-type", "--max-length",
                                             "--truncation-mode"};
  for (const std::string& flag : objective == "dpo" ? lm_only : dpo_only)
    TITAN_CHECK(!flags.has(flag), "titan eval: ", flag, " does not apply to --objective ",
                objective, " (see titan eval --help)");
  if (objective == "dpo") return run_eval_dpo(flags);
  // Data errors advise eval's flags, not training's config keys.
  data::set_setting_names({"--text-field", "--sft"});
  // SFT is trained with document masking (the SFT config functions' packing hf_flattening):
  // evaluated the same way unless --packing says otherwise.
  const std::string packing =
      flags.get("--packing", flags.has("--document-masking") || flags.has("--sft") ? "hf_flattening"
                                                                                   : "megatron");
  TITAN_CHECK(packing == "megatron" || packing == "hf_flattening" || packing == "torchtitan",
              "titan eval: --packing \"", packing,
              "\": accepted values are megatron, hf_flattening, torchtitan");
  TITAN_CHECK(!flags.has("--document-masking") || packing != "megatron",
              "titan eval: --document-masking contradicts --packing megatron");
  const int64_t seq_len = flags.get_int("--seq-len", 512);
  const int64_t steps = flags.get_int("--steps", 8);
  const int64_t batch_size = flags.get_int("--batch-size", 1);
  TITAN_CHECK(seq_len >= 1 && steps >= 1 && batch_size >= 1,
              "titan eval: --seq-len, --steps and --batch-size must be positive");
  models::BuildOptions options;
  options.device = train::resolve_device(flags.get("--device", "auto"));
  LoadedModel loaded =
      load_model(flags.require("--model"), options, backend_spec(flags), flags.get("--base"));
  // The batches' buffers reused from one to the next, once loading has given back what it freed.
  keep_freed_blocks_for_reuse();
  const std::string tokenizer_dir = flags.get("--tokenizer", loaded.tokenizer_dir);
  TITAN_CHECK(!tokenizer_dir.empty(), "titan eval: no tokenizer.json next to the model; pass ",
              "--tokenizer DIR");
  auto tokenizer =
      std::make_shared<const data::Tokenizer>(data::Tokenizer::from_directory(tokenizer_dir));
  data::LoaderOptions loader_options;
  loader_options.local_batch_size = batch_size;
  loader_options.seq_len = seq_len;
  // torchtitan's packing separates documents with the tokenizer's own eos, as training does.
  const std::string tokenizer_eos = config::tokenizer_config_eos(tokenizer_dir);
  loader_options.eos_id = tokenizer->token_to_id(flags.get(
      "--eos-token",
      packing == "torchtitan" && !tokenizer_eos.empty() ? tokenizer_eos : "<|endoftext|>"));
  loader_options.text_field = flags.get("--text-field", "text");
  loader_options.document_masking = packing != "megatron";
  loader_options.shift_within_documents = packing == "torchtitan";
  if (flags.has("--sft")) loader_options.chat_template = data::load_chat_template(tokenizer_dir);
  const std::string data_path = flags.require("--data");
  std::error_code ec;
  TITAN_CHECK(std::filesystem::exists(data_path, ec) ||
                  data_path.find_first_of("*?[,") != std::string::npos,
              "titan eval: --data ", data_path, ": no such file or folder");
  if (auto w = train::seq_len_warning(seq_len, loaded.model->hf_config("float32"), "--seq-len"))
    train::print_warning(*w);
  // Tokens (or pairs) of one pass over the data, up to what the steps take: the loader would
  // start over.
  const bool pairs = loader_options.shift_within_documents;
  const int64_t window = pairs ? seq_len : seq_len + 1;
  const int64_t wanted = steps * batch_size * window;
  const int64_t available = units_up_to(data_path, tokenizer, loader_options, wanted);
  if (available < wanted) {
    train::print_warning(
        "--data " + data_path + " holds " + std::to_string(available) +
        (pairs ? " token pairs" : " tokens") + ", fewer than --steps " + std::to_string(steps) +
        " x --batch-size " + std::to_string(batch_size) + " x " +
        (pairs ? "--seq-len " + std::to_string(seq_len)
               : "(--seq-len " + std::to_string(seq_len) + " + 1)") +
        " = " + std::to_string(wanted) + ": evaluated once, to the end of the data");
  }
  const int64_t batches = (available + batch_size * window - 1) / (batch_size * window);
  data::DataLoader loader(tokenizer, data_path, loader_options);

  const train::CausalLmLoss loss(*loaded.model, /*overrides=*/nullptr);
  at::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < batches; ++i) {
    data::Batch batch = loader.next();
    if (available < wanted) {
      // Window w's label j is token w * window + j + 1 of the stream (pair w * window + j when
      // shifting within documents): past the data, it is the start of the data again.
      const at::Tensor rows = at::arange(i * batch_size, (i + 1) * batch_size, at::kLong);
      const at::Tensor target = rows.unsqueeze(1) * window +
                                at::arange(pairs ? 0 : 1, seq_len + (pairs ? 0 : 1), at::kLong);
      batch.labels = batch.labels.masked_fill(target >= available, -100);
    }
    const train::BatchLoss b = train::batch_loss(*loaded.model, loss, batch, options.device);
    loss_sum += b.loss_sum.item<double>();
    tokens += b.tokens;
  }
  TITAN_CHECK(tokens > 0, "titan eval: --data ", data_path, " holds ", available,
              " tokens: no label to evaluate (it needs at least 2)");
  std::cout << nlohmann::json{{"loss", loss_sum / double(tokens)}, {"tokens", tokens}}.dump()
            << std::endl;
  return 0;
}

}  // namespace titan::cli
