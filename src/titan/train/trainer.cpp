#include "titan/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "titan/common/error.h"
#include "titan/config/validate.h"
#include "titan/data/data_loader.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/models/model_spec.h"
#include "titan/train/grad_clip.h"
#include "titan/train/loss.h"
#include "titan/train/lr_scheduler.h"
#include "titan/train/metrics.h"
#include "titan/train/optimizer.h"
#include "titan/train/precision.h"
#include "titan/train/training_state.h"

namespace titan::train {
namespace {

using Clock = std::chrono::steady_clock;

// Number of micro-batches per optimizer step (gradient accumulation).
int64_t micro_batches_per_step(const config::TrainingConfig& t, int64_t dp_degree) {
  if (t.global_batch_size < 0) return 1;
  const int64_t per_pass = t.local_batch_size * dp_degree;
  TITAN_CHECK(
      t.global_batch_size % per_pass == 0, "training.global_batch_size (", t.global_batch_size,
      ") must be a multiple of training.local_batch_size x data-parallel degree (", per_pass, ")");
  return t.global_batch_size / per_pass;
}

}  // namespace

// The world size torchrun gives this process (1 when run directly).
static int64_t world_size_from_env() {
  const char* value = std::getenv("WORLD_SIZE");
  if (value == nullptr || *value == '\0') return 1;
  char* end = nullptr;
  const long long n = std::strtoll(value, &end, 10);
  TITAN_CHECK(end != value && *end == '\0' && n >= 1, "WORLD_SIZE='", value,
              "' is not a positive integer");
  return n;
}

TrainSummary run_training(const config::TrainerConfig& cfg) {
  const int64_t world_size = world_size_from_env();
  config::check_parallel_degrees(cfg.parallelism, world_size);
  TITAN_CHECK(world_size == 1, "this build trains in one process; WORLD_SIZE=", world_size,
              " (multi-process data parallelism is not implemented yet)");
  const Precision precision = resolve_precision(cfg.training);
  const at::Device device = precision.device;
  at::manual_seed(static_cast<uint64_t>(cfg.training.seed));
  if (cfg.training.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);

  // Data.
  auto tokenizer = std::make_shared<const data::Tokenizer>(
      data::Tokenizer::from_directory(cfg.model.hf_assets_path));
  const int32_t eos_id = tokenizer->token_to_id(cfg.training.eos_token);
  data::DataLoader loader(tokenizer, cfg.training.dataset_path, cfg.training.local_batch_size,
                          cfg.training.seq_len, eos_id);
  const int64_t micro_batches = micro_batches_per_step(cfg.training, /*dp_degree=*/1);

  // Model.
  const models::ModelSpec& spec = models::get_model_spec(cfg.model.name);
  models::BuildOptions build;
  build.device = device;
  build.param_dtype = precision.param_dtype;
  build.compute_dtype = precision.compute_dtype;
  build.seed = static_cast<uint64_t>(cfg.training.seed);
  std::unique_ptr<models::Model> model = spec.build(cfg, build);
  model->set_activation_checkpointing(cfg.activation_checkpoint.mode);
  const int64_t model_vocab = model->output_weight().size(0);
  TITAN_CHECK(tokenizer->vocab_size() <= model_vocab, "the tokenizer in ", cfg.model.hf_assets_path,
              " has ", tokenizer->vocab_size(), " tokens but the model's vocabulary is ",
              model_vocab);

  AdamW optimizer(model->named_parameters(), cfg.optimizer);
  LRScheduler scheduler(cfg.lr_scheduler, cfg.training.steps, cfg.optimizer.lr);
  TrainingState state(cfg, spec, *model, optimizer, loader);
  const int64_t first_step = state.load_initial() + 1;  // resume, HF initial load or fresh

  std::vector<at::Tensor> params;
  for (auto& [name, p] : model->named_parameters()) params.push_back(p);
  const double flops_per_token = spec.flops_per_token(*model, cfg.training.seq_len);
  const auto peak_flops = device_peak_flops(device);
  MetricsLogger metrics(cfg.job.dump_folder, /*enabled=*/true);

  TrainSummary summary;
  summary.last_step = first_step - 1;
  for (int64_t step = first_step; step <= cfg.training.steps; ++step) {
    const auto start = Clock::now();
    std::vector<data::Batch> batches;
    int64_t valid_tokens = 0;
    for (int64_t i = 0; i < micro_batches; ++i) {
      batches.push_back(loader.next());
      valid_tokens += count_valid_tokens(batches.back().labels);
    }
    TITAN_CHECK(valid_tokens > 0, "step ", step, " has no valid label tokens");

    // loss = summed cross-entropy over the step's valid tokens / their number, accumulated
    // over micro-batches so that accumulation gives the same gradient as one big batch.
    double step_loss = 0;
    for (auto& batch : batches) {
      const at::Tensor inputs = batch.inputs.to(device);
      const at::Tensor labels = batch.labels.to(device);
      const at::Tensor hidden = model->final_hidden(inputs);
      at::Tensor loss =
          linear_cross_entropy_sum(hidden.flatten(0, 1), model->output_weight(), labels.flatten()) /
          static_cast<double>(valid_tokens);
      if (at::Tensor extra = model->extra_loss(); extra.defined())
        loss = loss + extra / static_cast<double>(micro_batches);
      loss.backward();
      step_loss += loss.item<double>();
    }
    TITAN_CHECK(std::isfinite(step_loss), "the loss became ", step_loss, " at step ", step,
                "; lower optimizer.lr or check the data");

    const double grad_norm = clip_grad_norm(params, cfg.training.max_norm);
    const double lr = scheduler.lr_at(step - 1);
    optimizer.step(lr);
    optimizer.zero_grad();
    model->after_optimizer_step();
    state.on_step_end(step, micro_batches * cfg.training.local_batch_size * cfg.training.seq_len);
    summary.losses.push_back(step_loss);
    summary.last_step = step;

    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (step == 1 || step % cfg.metrics.log_freq == 0 || step == cfg.training.steps) {
      StepMetrics m;
      m.step = step;
      m.loss = step_loss;
      m.grad_norm = grad_norm;
      m.lr = lr;
      std::tie(m.memory_gib, m.memory_percent) = peak_memory(device);
      m.tps =
          double(micro_batches * cfg.training.local_batch_size * cfg.training.seq_len) / seconds;
      m.tflops = flops_per_token * m.tps / 1e12;
      if (peak_flops) m.mfu = 100.0 * flops_per_token * m.tps / *peak_flops;
      metrics.log(m);
    }
    state.maybe_save(step, /*last=*/step == cfg.training.steps);
  }
  state.finish();
  summary.hf_export_dir = state.export_hf_if_requested(summary.last_step);
  return summary;
}

}  // namespace titan::train
