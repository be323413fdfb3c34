#include "titan/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "titan/common/error.h"
#include "titan/config/config_fields.h"
#include "titan/config/field_values.h"
#include "titan/config/validate.h"
#include "titan/data/data_loader.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/model_spec.h"
#include "titan/train/checkpoint_manager.h"
#include "titan/train/distributed_setup.h"
#include "titan/train/final_export.h"
#include "titan/train/grad_clip.h"
#include "titan/train/initial_load.h"
#include "titan/train/kernel_overrides.h"
#include "titan/train/loader_options.h"
#include "titan/train/loss.h"
#include "titan/train/lr_scheduler.h"
#include "titan/train/metrics.h"
#include "titan/train/optimizer.h"
#include "titan/train/precision.h"
#include "titan/train/progress_line.h"
#include "titan/train/sharded_layout.h"
#include "titan/train/step_profiler.h"
#include "titan/train/stop_request.h"
#include "titan/train/validator.h"

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

// <dump_folder>/<metrics.save_tb_folder> when TensorBoard is on, else "".
std::string tensorboard_folder(const config::TrainerConfig& cfg) {
  if (!cfg.metrics.enable_tensorboard) return "";
  return (std::filesystem::path(cfg.job.dump_folder) / cfg.metrics.save_tb_folder).string();
}

// One training run, set up in torchtitan's order: the other ranks, data, model (with its
// kernels resolved), loss, parallelize, optimizer, post_optimizer_build, schedule, then what
// to start from.
class Trainer {
 public:
  Trainer(const config::TrainerConfig& cfg, DistributedSetup& dist)
      : cfg_(cfg),
        dist_(dist),
        precision_(resolve_precision(cfg.training, dist.env.local_rank)),
        connected_(connect_ranks()),
        overrides_(make_override_resolver(cfg, precision_)),
        tokenizer_(std::make_shared<const data::Tokenizer>(
            data::Tokenizer::from_directory(cfg.model.hf_assets_path))),
        loader_(tokenizer_, cfg.training.dataset_path,
                loader_options(cfg, tokenizer_->token_to_id(cfg.training.eos_token))),
        spec_(models::get_model_spec(cfg.model.name)),
        model_(build_model()),
        loss_(*model_, &overrides_),
        optimizer_(parallelize_then_params(), cfg.optimizer),
        scheduler_(cfg.lr_scheduler, cfg.training.steps, cfg.optimizer.lr),
        layout_(dist.data_parallel.get(), dist.rank()),
        checkpoints_(cfg, spec_, *model_, optimizer_, loader_, layout_, save_coordination()),
        metrics_(cfg.job.dump_folder, /*enabled=*/dist.rank() == 0, tensorboard_folder(cfg)),
        validator_(cfg, tokenizer_, tokenizer_->token_to_id(cfg.training.eos_token), dist.dp_size(),
                   dist.dp_rank()),
        progress_(std::cout, /*enabled=*/dist.rank() == 0),
        profiler_(cfg, dist.rank(), precision_.device) {
    micro_batches_ = micro_batches_per_step(cfg.training, dist_.dp_size());
    if (spec_.post_optimizer_build) {
      models::OptimizerHooks hooks;
      hooks.add_step_post_hook = [this](std::function<void()> hook) {
        optimizer_.add_step_post_hook(std::move(hook));
      };
      if (dist_.dp_size() > 1)
        hooks.all_reduce_sum = [this](at::Tensor& t) { dist_.all_reduce_dp(t); };
      spec_.post_optimizer_build(*model_, hooks);
    }
    for (auto& [name, p] : model_->named_parameters()) params_.push_back(p);
    log_model_state_size();
    peak_flops_ = device_peak_flops(precision_.device);
    first_step_ = load_initial_state(cfg, spec_, *model_, checkpoints_, layout_) + 1;
  }

  TrainSummary train() {
    TrainSummary summary;
    summary.last_step = first_step_ - 1;
    for (int64_t step = first_step_; step <= cfg_.training.steps; ++step) {
      const auto start = Clock::now();
      const nlohmann::json loader_before = loader_.state();
      StepResult result;
      try {
        profiler_.begin_step(step);
        result = train_step(step);
        const std::string trace = profiler_.end_step(step);
        if (!trace.empty() && dist_.rank() == 0) {
          progress_.clear();
          std::cout << "[titan] profiled step " << step << ": " << trace << std::endl;
        }
      } catch (const data::DataReadError&) {
        // Nothing of this step reached the weights (its batches are read first): keep the
        // state after the previous step, with the data where this step began.
        progress_.clear();
        // (Unless this run has trained no step yet, or step - 1 is saved on the interval.)
        if (step - 1 >= first_step_ && (step - 1) % cfg_.checkpoint.interval != 0)
          checkpoints_.save_before_stopping(step - 1, loader_before);
        throw;
      }
      summary.losses.push_back(result.loss);
      summary.last_step = step;
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::optional<double> validation_loss;
      if (validator_.due(step)) validation_loss = validate(step);
      if (step == 1 || step % cfg_.metrics.log_freq == 0 || step == cfg_.training.steps ||
          validation_loss) {
        progress_.clear();
        log_step(step, result, seconds, validation_loss);
      } else {
        progress_.update(step, cfg_.training.steps, seconds);
      }
      if (cfg_.debug.step_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(cfg_.debug.step_delay_ms));
      // Every rank stops after the same step: the first to see a signal decides for all.
      const bool stopping = stop_agreed();
      checkpoints_.maybe_save(step, /*last=*/step == cfg_.training.steps || stopping);
      // The first step may be slow (allocation, first collectives): it had the init timeout.
      if (step == first_step_ && dist_.world) dist_.world->use_train_timeout();
      if (stopping && step < cfg_.training.steps) {
        summary.stop_signal = stop_.signal() != 0 ? stop_.signal() : -1;
        break;
      }
    }
    progress_.clear();
    checkpoints_.finish();
    if (cfg_.checkpoint.enable) summary.checkpoint_dir = checkpoints_.step_dir(summary.last_step);
    // A stopped run is not finished: its final export waits for the resumed run's end.
    if (summary.stop_signal == 0)
      summary.hf_export_dir =
          export_hf_if_requested(cfg_, spec_, *model_, summary.last_step, layout_);
    summary.skipped_steps = skipped_steps_;
    return summary;
  }

 private:
  struct StepResult {
    double loss = 0;
    double grad_norm = 0;
    double lr = 0;
  };

  // Whether a stop was requested on any rank (one tiny all-reduce per step when distributed).
  bool stop_agreed() {
    const double here = stop_.signal() != 0 ? 1.0 : 0.0;
    if (dist_.env.world_size == 1) return here > 0;
    return sum_over_dp(here) > 0;
  }

  // The validator's held-out loss, logged as torchtitan does.
  double validate(int64_t step) {
    const double loss = validator_.run(
        [this](const data::Batch& batch) {
          const at::Tensor inputs = batch.inputs.to(precision_.device);
          const at::Tensor labels = batch.labels.to(precision_.device);
          const models::ModelOutput out =
              model_->forward_packed(inputs, packed_documents(batch, precision_.device));
          return std::pair<double, double>{loss_.sum(out.hidden, labels).item<double>(),
                                           static_cast<double>(count_valid_tokens(batch.labels))};
        },
        [this](double v) { return sum_over_dp(v); });
    progress_.clear();
    if (dist_.rank() == 0) std::cout << format_validation_line(step, loss) << std::endl;
    return loss;
  }

  std::unique_ptr<models::Model> build_model() {
    models::BuildOptions build;
    build.device = precision_.device;
    build.param_dtype = precision_.param_dtype;
    build.compute_dtype = precision_.compute_dtype;
    build.seed = static_cast<uint64_t>(cfg_.training.seed);
    build.overrides = &overrides_;
    std::unique_ptr<models::Model> model = spec_.build(cfg_, build);
    const int64_t model_vocab = model->output_weight().size(0);
    TITAN_CHECK(tokenizer_->vocab_size() <= model_vocab, "the tokenizer in ",
                cfg_.model.hf_assets_path, " has ", tokenizer_->vocab_size(),
                " tokens but the model's vocabulary is ", model_vocab);
    // Counted on the whole model, before data parallelism shards it.
    if (spec_.flops_per_token)
      flops_per_token_ = spec_.flops_per_token(*model, cfg_.training.seq_len);
    return model;
  }

  // How the ranks write one checkpoint together: through the store, into a folder named after
  // this run (rank 0's process id and start time, shared through the store).
  checkpoint::SaveCoordination save_coordination() {
    checkpoint::SaveCoordination c;
    c.rank = dist_.rank();
    c.world_size = dist_.env.world_size;
    if (c.world_size == 1) return c;
    distributed::World& world = *dist_.world;
    if (c.rank == 0) {
      const auto now = std::chrono::system_clock::now().time_since_epoch();
      world.store_set(
          "titan/checkpoint_run_id",
          std::to_string(::getpid()) + "-" +
              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
    }
    c.run_id = world.store_get("titan/checkpoint_run_id");
    c.publish = [&world](const std::string& key, const std::string& value) {
      world.store_set(key, value);
    };
    c.collect = [&world](const std::string& key) { return world.store_wait_and_get(key); };
    return c;
  }

  bool connect_ranks() {
    connect(dist_, cfg_, precision_, config::to_toml(cfg_));
    return true;
  }

  // This rank's rows of the next global batch: every rank reads the same stream, and rank r of
  // the data-parallel group takes the r-th local batch of every dp_size() in a row, so the
  // rows of a step do not depend on the layout.
  data::Batch next_local_batch() {
    data::Batch mine;
    for (int64_t r = 0; r < dist_.dp_size(); ++r) {
      data::Batch batch = loader_.next();
      if (r == dist_.dp_rank()) mine = std::move(batch);
    }
    return mine;
  }

  double sum_over_dp(double value) {
    if (dist_.dp_size() == 1) return value;
    at::Tensor t = at::tensor({value}, at::TensorOptions(precision_.device).dtype(at::kDouble));
    dist_.all_reduce_dp(t);
    return t.item<double>();
  }

  // Runs once the loss has resolved its kernel too: logs the overrides, applies the spec's
  // wrappers, and hands the optimizer the parameters (the optimizer comes after parallelize,
  // as in torchtitan, so it holds the tensors the wrapped model trains).
  NamedTensors parallelize_then_params() {
    overrides_.finish();
    for (const std::string& line : overrides_.summary(/*include_reference=*/false))
      std::cout << "[override] " << line << std::endl;
    TITAN_CHECK(dist_.data_parallel == nullptr || spec_.parallelize, "model '", spec_.name,
                "' has no parallelize step, so it cannot train data-parallel");
    if (spec_.parallelize) spec_.parallelize(*model_, cfg_, dist_.data_parallel.get());
    return model_->named_parameters();
  }

  // Sums over the data-parallel ranks in place, leaving the result on the device (no host
  // synchronisation; nothing to do on one process).
  at::Tensor sum_over_dp_on_device(at::Tensor t) {
    if (dist_.dp_size() > 1) dist_.all_reduce_dp(t);
    return t;
  }

  // loss = summed cross-entropy over the step's valid tokens / their number, accumulated over
  // micro-batches so that accumulation gives the same gradient as one big batch.
  //
  // Nothing here waits for the device until the step's one host read, after the gradient norm:
  // the loss, the token count, the norm and the clip coefficient are read together, for the
  // log line and for the decision to update or skip. The labels stay on the host for the loss,
  // which checks their range there (a check on the device would be a synchronisation).
  StepResult train_step(int64_t step) {
    std::vector<data::Batch> batches;
    int64_t local_tokens = 0;
    for (int64_t i = 0; i < micro_batches_; ++i) {
      batches.push_back(next_local_batch());
      local_tokens += count_valid_tokens(batches.back().labels);  // host tensors: no sync
    }
    const auto f64 = at::TensorOptions(precision_.device).dtype(at::kDouble);
    // The loss is the summed token loss of the whole global batch over its global count.
    const at::Tensor valid_tokens =
        sum_over_dp_on_device(at::full({1}, static_cast<double>(local_tokens), f64));
    const at::Tensor divisor = valid_tokens.reshape({}).to(at::kFloat);
    // Auxiliary losses are means over a rank's tokens: their gradients are averaged.
    const double extra_scale = static_cast<double>(micro_batches_ * dist_.dp_size());
    distributed::DataParallel* dp = dist_.data_parallel.get();
    at::Tensor loss_sum = at::zeros({1}, f64);
    for (size_t i = 0; i < batches.size(); ++i) {
      if (dp) dp->set_gradient_sync(i + 1 == batches.size());
      const at::Tensor inputs = batches[i].inputs.to(precision_.device);
      const models::ModelOutput out =
          model_->forward_packed(inputs, packed_documents(batches[i], precision_.device));
      at::Tensor loss = loss_.sum(out.hidden, batches[i].labels) / divisor;
      if (out.extra_loss.defined()) loss = loss + out.extra_loss / extra_scale;
      if (step == cfg_.debug.inject_nonfinite_at_step)
        loss = loss * std::numeric_limits<double>::quiet_NaN();
      loss.backward();
      if (dp) dp->finish_backward();
      loss_sum.add_(loss.detach().to(at::kDouble));
    }
    sum_over_dp_on_device(loss_sum);
    ReduceSquares reduce_squares;
    if (dp) reduce_squares = [dp](at::Tensor& squares) { dp->reduce_grad_norm_squares(squares); };
    const GradNorm norm = grad_norm(params_, cfg_.training.max_norm, reduce_squares);
    // The step's one host read.
    const at::Tensor host = at::cat({loss_sum, valid_tokens, norm.norm.to(at::kDouble).reshape({1}),
                                     norm.coefficient.to(at::kDouble).reshape({1})})
                                .to(at::kCPU);
    const double* values = host.const_data_ptr<double>();
    TITAN_CHECK(values[1] > 0, "step ", step, " has no valid label tokens");
    StepResult result;
    result.loss = values[0];
    result.lr = scheduler_.lr_at(step - 1);
    const char* nonfinite = nullptr;  // what was not finite, if anything, and its value
    double value = 0;
    if (!std::isfinite(result.loss)) {
      nonfinite = "loss";
      value = result.loss;
    } else {
      result.grad_norm = values[2];
      if (!std::isfinite(result.grad_norm)) {
        nonfinite = "gradient norm";
        value = result.grad_norm;
      }
    }
    if (nonfinite != nullptr) {
      // Every rank sees the same (all-reduced) values, so every rank decides the same.
      TITAN_CHECK(cfg_.training.skip_nonfinite_steps, "step ", step, ": the ", nonfinite, " is ",
                  value,
                  "; stopped before updating the weights (lower optimizer.lr, check the "
                  "data, or set training.skip_nonfinite_steps = true to skip such steps)");
      optimizer_.zero_grad();
      ++skipped_steps_;
      if (dist_.rank() == 0) {
        progress_.clear();
        std::cout << "[titan] step " << step << " skipped: the " << nonfinite << " is " << value
                  << " (" << skipped_steps_ << " skipped so far)" << std::endl;
      }
      checkpoints_.on_step_end(tokens_per_step() * dist_.dp_size());
      return result;
    }
    // Scaling by a coefficient of exactly 1 changes nothing, so that pass is skipped.
    if (values[3] < 1.0) scale_grads(params_, norm.coefficient);
    optimizer_.step(result.lr);
    optimizer_.zero_grad();
    checkpoints_.on_step_end(tokens_per_step() * dist_.dp_size());
    return result;
  }

  // What this rank holds of the model: data parallelism should bring it close to 1/N.
  void log_model_state_size() const {
    double bytes = 0;
    for (const at::Tensor& p : params_) bytes += static_cast<double>(p.numel() * p.element_size());
    const double mib = bytes / (1024.0 * 1024.0);
    const bool sharded = dist_.data_parallel && dist_.data_parallel->sharded();
    std::ostringstream line;
    line.setf(std::ios::fixed);
    line.precision(1);
    line << "[titan] rank " << dist_.rank() << " of " << dist_.env.world_size << " holds " << mib
         << " MiB of parameters, as much again of gradients and " << 2 * mib
         << " MiB of optimizer state (" << (sharded ? "sharded" : "whole") << ")";
    std::cout << line.str() << std::endl;
  }

  // This rank's tokens (tps is per device).
  int64_t tokens_per_step() const {
    return micro_batches_ * cfg_.training.local_batch_size * cfg_.training.seq_len;
  }

  void log_step(int64_t step, const StepResult& r, double seconds,
                std::optional<double> validation_loss) {
    StepMetrics m;
    m.skipped_steps = skipped_steps_;
    m.data_loading_s = loader_.wait_seconds() - data_wait_logged_;
    data_wait_logged_ = loader_.wait_seconds();
    m.validation_loss = validation_loss;
    m.memory_reserved_gib = peak_reserved_memory(precision_.device);
    m.step = step;
    m.loss = r.loss;
    m.grad_norm = r.grad_norm;
    m.lr = r.lr;
    std::tie(m.memory_gib, m.memory_percent) = peak_memory(precision_.device);
    m.tps = static_cast<double>(tokens_per_step()) / seconds;
    m.tflops = flops_per_token_ * m.tps / 1e12;
    if (peak_flops_) m.mfu = 100.0 * flops_per_token_ * m.tps / *peak_flops_;
    metrics_.log(m);
  }

  const config::TrainerConfig& cfg_;
  DistributedSetup& dist_;
  Precision precision_;
  bool connected_;
  kernels::OverrideResolver overrides_;
  std::shared_ptr<const data::Tokenizer> tokenizer_;
  data::DataLoader loader_;
  const models::ModelSpec& spec_;
  double flops_per_token_ = 0;  // set while the model is built
  std::unique_ptr<models::Model> model_;
  CausalLmLoss loss_;
  AdamW optimizer_;
  LRScheduler scheduler_;
  ShardedLayout layout_;
  CheckpointManager checkpoints_;
  MetricsLogger metrics_;
  Validator validator_;
  ProgressLine progress_;
  StepProfiler profiler_;
  StopRequest stop_;
  int64_t skipped_steps_ = 0;
  double data_wait_logged_ = 0;  // the loader's wait up to the last logged step
  int64_t micro_batches_ = 1;
  std::vector<at::Tensor> params_;
  std::optional<double> peak_flops_;
  int64_t first_step_ = 1;
};

}  // namespace

TrainSummary run_training(const config::TrainerConfig& cfg) {
  // The layout is checked before anything is built or any rank waits for another.
  DistributedSetup dist = check_distributed_layout(cfg);
  at::manual_seed(static_cast<uint64_t>(cfg.training.seed));
  if (cfg.training.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  Trainer trainer(cfg, dist);
  return trainer.train();
}

}  // namespace titan::train
