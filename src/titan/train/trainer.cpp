#include "titan/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "titan/common/error.h"
#include "titan/common/heap_reuse.h"
#include "titan/config/config_fields.h"
#include "titan/config/field_values.h"
#include "titan/config/validate.h"
#include "titan/data/data_loader.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/materialize.h"
#include "titan/models/model_spec.h"
#include "titan/train/context_parallel_batch.h"
#include "titan/train/distributed_setup.h"
#include "titan/train/forward_backward.h"
#include "titan/train/grad_clip.h"
#include "titan/train/grad_norm.h"
#include "titan/train/kernel_overrides.h"
#include "titan/train/loader_options.h"
#include "titan/train/loss.h"
#include "titan/train/lr_scheduler.h"
#include "titan/train/memory_fit.h"
#include "titan/train/model_converters.h"
#include "titan/train/model_parts.h"
#include "titan/train/optimizer.h"
#include "titan/train/pipeline/pipeline_setup.h"
#include "titan/train/precision.h"
#include "titan/train/preference/dpo_run.h"
#include "titan/train/report/metrics.h"
#include "titan/train/report/model_state_log.h"
#include "titan/train/report/progress_line.h"
#include "titan/train/report/run_warnings.h"
#include "titan/train/report/step_profiler.h"
#include "titan/train/state/checkpoint_manager.h"
#include "titan/train/state/checkpoint_parts.h"
#include "titan/train/state/final_export.h"
#include "titan/train/state/initial_load.h"
#include "titan/train/state/placed_layout.h"
#include "titan/train/state/resume_config_check.h"
#include "titan/train/stop_request.h"
#include "titan/train/validator.h"

namespace titan::train {
namespace {

using Clock = std::chrono::steady_clock;

// One training run. The set-up is one readable sequence, in torchtitan's order (each step a
// method below): connect the ranks, build the mesh, the data and the model (its kernels
// resolved; under pipeline parallelism this rank's stages), parallelize it, build the loss over
// what parallelize left of the head and check the overrides, build the optimizer and the step's
// forward-backward, declare the checkpoint's parts, then restore what to start from.
class Trainer {
 public:
  // `dist`: the launch environment and the layout, already checked.
  Trainer(const config::TrainerConfig& cfg, DistributedSetup dist,
          const std::function<void()>& started)
      : cfg_(cfg), dist_(std::move(dist)) {
    precision_ = resolve_precision(cfg.training, dist_.env.local_rank);
    connect_ranks();
    build_mesh();
    build_data();
    build_model();
    parallelize();
    build_loss();
    apply_overrides();
    build_optimizer();
    build_step();
    build_checkpointing();
    restore();
    start_writing(started);
    stop_.emplace();
  }

  TrainSummary train() {
    // From here on a step's large buffers are reused from one step to the next instead of being
    // mapped and zero-filled anew; not before, so that what loading frees (a layer at full
    // precision before QLoRA quantises it, conversion buffers) goes back to the system
    // (common/heap_reuse.h).
    keep_freed_blocks_for_reuse();
    TrainSummary summary;
    summary.last_step = first_step_ - 1;
    last_logged_step_ = first_step_ - 1;
    last_log_time_ = Clock::now();
    for (int64_t step = first_step_; step <= cfg_.training.steps; ++step) {
      const auto start = Clock::now();
      const nlohmann::json loader_before = loader_->state();
      StepResult result;
      try {
        profiler_->begin_step(step);
        result = train_step(step);
        const std::string trace = profiler_->end_step(step);
        if (!trace.empty() && dist_.rank() == 0) {
          progress_->clear();
          std::cout << "[titan] profiled step " << step << ": " << trace << std::endl;
        }
      } catch (const data::DataReadError&) {
        // Nothing of this step reached the weights (its batches are read first): keep the
        // state after the previous step, with the data where this step began.
        progress_->clear();
        // (Unless this run has trained no step yet, or step - 1 is saved on the interval.)
        if (step - 1 >= first_step_ && (step - 1) % cfg_.checkpoint.interval != 0)
          save_before_stopping(step - 1, loader_before);
        throw;
      }
      summary.losses.push_back(result.loss);
      summary.last_step = step;
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::optional<double> validation_loss;
      if (validator_->due(step)) validation_loss = validate(step);
      if (step == 1 || step % cfg_.metrics.log_freq == 0 || step == cfg_.training.steps ||
          validation_loss) {
        progress_->clear();
        log_step(step, result, seconds, validation_loss);
        // torchtitan's order: the step line, then its validation.
        if (validation_loss && dist_.rank() == 0)
          std::cout << format_validation_line(step, *validation_loss) << std::endl;
      } else {
        progress_->update(step, cfg_.training.steps, seconds);
      }
      if (cfg_.debug.step_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(cfg_.debug.step_delay_ms));
      // Every rank stops after the same step: the first to see a signal decides for all.
      const bool stopping = stop_agreed();
      checkpoints_->maybe_save(step, /*last=*/step == cfg_.training.steps || stopping);
      // The first step may be slow (allocation, first collectives): it had the init timeout,
      // and the pipeline's bubble is measured from the next one on.
      if (step == first_step_ && dist_.world) dist_.world->use_train_timeout();
      if (step == first_step_ && pipeline_) pipeline_->restart_timing();
      if (stopping && step < cfg_.training.steps) {
        summary.stop_signal = stop_->signal() != 0 ? stop_->signal() : -1;
        break;
      }
    }
    progress_->clear();
    // Every rank says how much of the data it read itself (shared reading splits it).
    std::cout << "[titan] rank " << dist_.rank() << " of " << dist_.env.world_size << " read "
              << loader_->documents_read() << " documents" << std::endl;
    for (const std::string& line : loader_->report()) print_warning(line);
    checkpoints_->finish();
    if (cfg_.checkpoint.enable) summary.checkpoint_dir = checkpoints_->step_dir(summary.last_step);
    // A stopped run is not finished: its final export waits for the resumed run's end.
    if (pipeline_) pipeline_->log_times(parts_);
    if (summary.stop_signal == 0) {
      // A pipeline's export gathers each tensor from the stage that holds it.
      std::optional<checkpoint::NativeTensors> staged;
      if (pipeline_) staged = pipeline_->export_tensors(parts_, *layout_);
      const ExportedFolders exported =
          export_hf_if_requested(cfg_, *spec_, parts_, summary.last_step, *layout_,
                                 lora_ ? &*lora_ : nullptr, staged ? &*staged : nullptr);
      summary.hf_export_dir = exported.hf;
      summary.adapter_export_dir = exported.adapter;
    }
    summary.skipped_steps = skipped_steps_;
    return summary;
  }

 private:
  struct StepResult {
    double loss = 0;
    double max_loss = 0;  // the largest data-parallel rank's mean token loss
    double grad_norm = 0;
    double lr = 0;
    int64_t trained_tokens = 0;  // the step's label tokens over all ranks
  };

  // Whether a stop was requested on any rank (one tiny all-reduce per step when distributed).
  bool stop_agreed() {
    const double here = stop_->signal() != 0 ? 1.0 : 0.0;
    if (dist_.env.world_size == 1) return here > 0;
    at::Tensor t = at::tensor({here}, at::TensorOptions(precision_.device).dtype(at::kDouble));
    parallel_->all_reduce("world", t);
    return t.item<double>() > 0;
  }

  // The validator's held-out loss, logged as torchtitan does.
  double validate(int64_t step) {
    const double loss = validator_->run(
        [this](const data::Batch& batch) {
          return forward_backward_->evaluate(cp_batch_->shard(batch));
        },
        [this](double v) { return sum_over("loss", v); });
    parallel_->finish_forward_only();  // FSDP's last units kept their parameters gathered
    return loss;
  }

  // ---- set-up, in order ----------------------------------------------------------------

  // Rendezvous with the other ranks (a world of one alone), which must have resolved the same
  // config.
  void connect_ranks() { connect(dist_, cfg_, precision_, config::to_toml(cfg_)); }

  // The device mesh and its groups (a collective), and the context parallelize receives.
  void build_mesh() {
    parallel_ = build_parallel_context(dist_, cfg_, precision_);
    layout_ = std::make_unique<PlacedLayout>(*parallel_);
  }

  // The tokenizer and the loader of this rank's rows; the data-parallel ranks share the
  // reading (each tokenizes about 1/dp of the documents), and the rows of a step are the same
  // whatever the layout.
  void build_data() {
    tokenizer_ = std::make_shared<const data::Tokenizer>(
        data::Tokenizer::from_directory(cfg_.model.hf_assets_path));
    const int32_t eos = tokenizer_->token_to_id(cfg_.training.eos_token);
    data::LoaderOptions options = loader_options(cfg_, eos);
    options.row_rank = batch_rank();
    options.row_ranks = batch_ranks();
    // (The cp ranks of a data-parallel rank read the same rows: they share the reading too.)
    if (parallel_->mesh().size("data") > 1 && cfg_.debug.shared_reading)
      options.exchange = document_exchange(parallel_->mesh());
    if (is_dpo(cfg_)) dpo_.emplace(cfg_);
    loader_ =
        dpo_ ? dpo_->loader(tokenizer_, batch_rank(), batch_ranks())
             : std::make_unique<data::DataLoader>(tokenizer_, cfg_.training.dataset_path, options);
    cp_batch_.emplace(*parallel_);
    validator_.emplace(cfg_, tokenizer_, eos, batch_ranks(), batch_rank());
    micro_batches_ = micro_batches_per_step(cfg_.training, batch_ranks());
  }

  // The model, built whole on every rank (parallelize splits it), with the implementation of
  // every overridable op chosen at its call site; under pipeline parallelism the rank keeps its
  // stages only (pipeline/pipeline_setup.h). It is built as shapes only: the memory check reads
  // them, then each weight gets its storage once, in the dtype it keeps (LoRA's base from the
  // converter, weight by weight; any other model uninitialised when a load will fill it, else
  // from the seeded init).
  void build_model() {
    overrides_.emplace(make_override_resolver(cfg_, precision_));
    spec_ = &models::get_model_spec(cfg_.model.name);
    models::BuildOptions build;
    build.device = precision_.device;
    build.param_dtype = precision_.param_dtype;
    build.compute_dtype = precision_.compute_dtype;
    build.seed = static_cast<uint64_t>(cfg_.training.seed);
    build.overrides = &*overrides_;
    build.meta_parameters = true;  // (the Transformers backend builds with its weights)
    std::unique_ptr<models::Model> model = spec_->build(cfg_, build);
    const int64_t model_vocab = model->output_weight().size(0);
    TITAN_CHECK(tokenizer_->vocab_size() <= model_vocab, "the tokenizer in ",
                cfg_.model.hf_assets_path, " has ", tokenizer_->vocab_size(),
                " tokens but the model's vocabulary is ", model_vocab);
    if (auto w =
            seq_len_warning(cfg_.training.seq_len, model->hf_config("float32"), "training.seq_len");
        w && dist_.rank() == 0)
      print_warning(*w);
    // Counted on the whole model, before parallelism splits it (and before QLoRA takes its
    // projections out of the parameters); each pipeline stage does about 1/pp of it.
    if (spec_->flops_per_token)
      flops_per_token_ = spec_->flops_per_token(*model, cfg_.training.seq_len) /
                         static_cast<double>(dist_.dims.pp);
    if (dist_.dims.pp > 1) {
      pipeline_.emplace(cfg_, *spec_, *model, *parallel_, precision_.device);
      parts_ = pipeline_->build_stages(build);
    } else {
      parts_ = ModelParts(std::move(model));
    }
    check_memory();
    lora_ = apply_model_converters(cfg_, *spec_, parts_, precision_.compute_dtype,
                                   precision_.device, dist_.rank() == 0);
    if (!models::has_meta_parameters(parts_)) return;
    models::MaterializeOptions options;
    options.device = precision_.device;
    // A stage draws the whole model's values in order and keeps its own: every stage gets the
    // values one process has.
    for (models::Model* part : parts_.models())
      models::materialize(
          *part,
          model_weights_are_loaded(cfg_)
              ? models::ParameterSource()
              : models::seeded_initialisation(*part, static_cast<uint64_t>(cfg_.training.seed)),
          options);
  }

  // Whether this rank's share of the model state fits its memory, from the shapes alone: a
  // run that cannot fit stops here, before anything is allocated, with what would fit.
  void check_memory() {
    const MemoryFitRun run{parts_, cfg_, precision_, dist_.dims,
                           parallel_->local_sequence(cfg_.training.seq_len)};
    const std::string warning = check_memory_fits(
        estimate_model_state(run),
        available_memory_bytes(precision_.device, dist_.env.local_world_size), run);
    if (!warning.empty() && dist_.rank() == 0) print_warning(warning);
  }

  // The loss, which resolves the cross_entropy kernel of the head, over what parallelize left
  // of it (the vocabulary-parallel loss when tensor parallelism split the head).
  void build_loss() {
    // (Under pipeline parallelism only the last stage computes it, with its head.)
    loss_.emplace(parts_.last(), &*overrides_, parallel_->vocab_parallel_loss(),
                  parallel_->vocabulary());
  }

  // Every call site is resolved: check the override claims and log them.
  void apply_overrides() {
    overrides_->finish();
    for (const std::string& line : overrides_->summary(/*include_reference=*/false))
      std::cout << "[override] " << line << std::endl;
  }

  // The spec's wrappers: activation checkpointing and each parallelism, through the context
  // (before the loss and the override log: parallelize may split the head the loss reads).
  void parallelize() {
    TITAN_CHECK(!parallel_->dims().data_parallel() || spec_->parallelize, "model '", spec_->name,
                "' has no parallelize step, so it cannot train data-parallel");
    if (spec_->parallelize)
      for (models::Model* part : parts_.models()) spec_->parallelize(*part, cfg_, *parallel_);
    if (pipeline_) pipeline_->hold_stage_tensors(parts_);
    parallel_->finish_placements();
  }

  // The optimizer over the tensors the parallelized model trains (after parallelize, as in
  // torchtitan), the spec's post-optimizer hooks, the schedule and the gradient norm.
  void build_optimizer() {
    // What requires gradients: every parameter, or with LoRA the adapters alone.
    const NamedTensors params = lora::trainable_parameters(parts_);
    optimizer_.emplace(params, cfg_.optimizer, &parallel_->placements());
    for (const auto& [name, p] : params) params_.push_back(p);
    grad_squares_.emplace(params, parallel_->placements(), parallel_->mesh());
    if (spec_->post_optimizer_build) {
      models::OptimizerHooks hooks;
      hooks.add_step_post_hook = [this](std::function<void()> hook) {
        optimizer_->add_step_post_hook(std::move(hook));
      };
      // Per-layer statistics (the expert-bias token counts): every rank routes its own tokens,
      // so they are summed over the ranks that hold the same layers.
      if (parallel_->purpose_size("layer_replicas") > 1)
        hooks.all_reduce_sum = [this](at::Tensor& t) {
          parallel_->all_reduce("layer_replicas", t);
        };
      for (models::Model* part : parts_.models()) spec_->post_optimizer_build(*part, hooks);
    }
    scheduler_.emplace(cfg_.lr_scheduler, cfg_.training.steps, cfg_.optimizer.lr);
    std::cout << model_state_line({*optimizer_, parts_, *parallel_, lora_ ? &*lora_ : nullptr,
                                   parts_.staged(), pipeline_ ? pipeline_->describe(parts_) : ""})
              << std::endl;
    peak_flops_ = device_peak_flops(precision_.device);
  }

  // What runs a step's forwards and backwards: the micro-batch loop, or the pipeline's
  // schedule over this rank's stages.
  void build_step() {
    if (pipeline_)
      forward_backward_ = pipeline_->forward_backward(parts_, *loss_, optimizer_->params(),
                                                      precision_.compute_dtype);
    else if (dpo_)
      forward_backward_ =
          dpo_->forward_backward(parts_.whole(), *loss_, *parallel_, optimizer_->params(),
                                 precision_.device, step_pairs());
    else
      forward_backward_ = std::make_unique<AccumulatingForwardBackward>(
          parts_.whole(), *loss_, *parallel_, optimizer_->params(), precision_.device);
  }

  // The checkpoint's parts, declared once, and what writes the step lines. A pipeline rank
  // loads its stages' tensors from checkpoints that hold every stage's.
  void build_checkpointing() {
    const HeldElsewhere elsewhere = pipeline_ ? pipeline_->held_elsewhere() : nullptr;
    model_state_.emplace(parts_, *spec_, cfg_, lora_ ? &*lora_ : nullptr, elsewhere);
    optimizer_state_.emplace(*optimizer_, parts_, elsewhere);
    scheduler_state_.emplace(train_state_);
    loader_state_.emplace(*loader_);
    StatefulParts parts{{checkpoint::kModelPart, &*model_state_},
                        {checkpoint::kOptimizerPart, &*optimizer_state_},
                        {checkpoint::kLrSchedulerPart, &*scheduler_state_},
                        {checkpoint::kDataLoaderPart, &*loader_state_},
                        {checkpoint::kTrainStatePart, &train_state_},
                        {checkpoint::kRngPart, &rng_state_}};
    if (dpo_ && cfg_.dpo.precompute_reference)
      parts.emplace_back(checkpoint::kDpoReferencePart, &*dpo_);
    checkpoints_.emplace(cfg_, std::move(parts), *layout_, save_coordination(dist_));
    progress_.emplace(std::cout, /*enabled=*/dist_.rank() == 0);
    profiler_.emplace(cfg_, dist_.rank(), precision_.device);
  }

  // Resume, an initial load, or the fresh model.
  void restore() {
    train_state_.step = load_initial_state(cfg_, *spec_, parts_, *checkpoints_, *layout_,
                                           /*base_loaded=*/lora_.has_value());
    first_step_ = train_state_.step + 1;
    if (dpo_) dpo_->prepare_reference(optimizer_->params(), /*resumed=*/first_step_ > 1);
    // (A torchtitan checkpoint records no titan config to compare with.)
    if (first_step_ > 1 && !checkpoints_->is_torchtitan_step(first_step_ - 1))
      warn_on_resume_config_change(cfg_,
                                   micro_batches_ * cfg_.training.local_batch_size * batch_ranks(),
                                   checkpoints_->step_dir(first_step_ - 1), dist_.rank() == 0);
    if (const auto converted = optimizer_->conversion_warning(); converted && dist_.rank() == 0)
      print_warning(*converted);
  }

  // The job's files in the dump folder, once the set-up has succeeded: a start that is refused
  // writes nothing (no dump folder, no empty metrics.jsonl, an earlier run's config.toml kept).
  void start_writing(const std::function<void()>& started) {
    if (started) started();
    metrics_.emplace(cfg_.job.dump_folder, /*enabled=*/dist_.rank() == 0, tensorboard_folder(cfg_));
  }

  // ---- during training --------------------------------------------------------------------

  // The ranks that read different rows of a step, and this rank's index among them.
  int64_t batch_ranks() const { return parallel_->purpose_size("batch"); }
  int64_t batch_rank() const { return parallel_->purpose_rank("batch"); }
  // DPO: the pairs of a step over every rank.
  int64_t step_pairs() const {
    return micro_batches_ * cfg_.training.local_batch_size * batch_ranks();
  }

  double sum_over(const std::string& purpose, double value) {
    if (parallel_->purpose_size(purpose) == 1) return value;
    at::Tensor t = at::tensor({value}, at::TensorOptions(precision_.device).dtype(at::kDouble));
    parallel_->all_reduce(purpose, t);
    return t.item<double>();
  }

  // One step, as llm.c's loop reads: the step's batches; their forwards and backwards (the
  // micro-batch loop, or the pipeline's schedule); the loss over the ranks; the gradient norm;
  // then the update (clipped), or a skip when something is not finite.
  //
  // loss = summed cross-entropy over the step's valid tokens / their number, accumulated over
  // micro-batches so that accumulation gives the same gradient as one big batch.
  //
  // Nothing here waits for the device until the step's one host read, after the gradient norm:
  // the loss, the token count, the norm and the clip coefficient are read together, for the
  // log line and for the decision to update or skip. The labels stay on the host for the loss,
  // which checks their range there (a check on the device would be a synchronisation).
  StepResult train_step(int64_t step) {
    const std::vector<data::Batch> batches = read_batches();
    const int64_t forwards = micro_batches_ * (pipeline_ ? pipeline_->microbatches() : 1);
    StepScale scale = step_scale(batches, *parallel_, forwards, precision_.device);
    scale.poison = step == cfg_.debug.inject_nonfinite_at_step;
    const at::Tensor loss = forward_backward_->run(batches, scale);
    if (dpo_) dpo_->reduce_metrics(*parallel_, step_pairs());
    const StepLoss reduced = reduce_step_loss(loss, batches, scale, *parallel_);
    const GradNorm norm = grad_norm_of_squares((*grad_squares_)(), cfg_.training.max_norm);
    return update(step, reduced, norm);
  }

  // The step's batches, read before anything else (a data error leaves the weights as they
  // were).
  std::vector<data::Batch> read_batches() {
    std::vector<data::Batch> batches;
    for (int64_t i = 0; i < micro_batches_; ++i)
      batches.push_back(cp_batch_->shard(loader_->next()));  // this cp rank's part of the rows
    return batches;
  }

  // The step's one host read, then the update: clipped, or skipped when the loss or the norm
  // is not finite (every rank sees the same reduced values, so every rank decides the same).
  StepResult update(int64_t step, const StepLoss& loss, const GradNorm& norm) {
    const at::Tensor host = at::cat({loss.loss, loss.tokens, norm.norm.to(at::kDouble).reshape({1}),
                                     norm.coefficient.to(at::kDouble).reshape({1}), loss.max_loss})
                                .to(at::kCPU);
    const double* values = host.const_data_ptr<double>();
    TITAN_CHECK(values[1] > 0, "step ", step, " has no valid label tokens");
    StepResult result;
    result.loss = values[0];
    result.trained_tokens = static_cast<int64_t>(values[1]);
    result.max_loss = values[4];
    result.lr = scheduler_->lr_at(step - 1);
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
      TITAN_CHECK(cfg_.training.skip_nonfinite_steps, "step ", step, ": the ", nonfinite, " is ",
                  value,
                  "; stopped before updating the weights (lower optimizer.lr, check the "
                  "data, or set training.skip_nonfinite_steps = true to skip such steps)");
      optimizer_->zero_grad();
      ++skipped_steps_;
      if (dist_.rank() == 0) {
        progress_->clear();
        std::cout << "[titan] step " << step << " skipped: the " << nonfinite << " is " << value
                  << " (" << skipped_steps_ << " skipped so far)" << std::endl;
      }
      end_step(step);
      return result;
    }
    // Scaling by a coefficient of exactly 1 changes nothing, so that pass is skipped.
    if (values[3] < 1.0) scale_grads(params_, norm.coefficient);
    optimizer_->step(result.lr);
    optimizer_->zero_grad();
    end_step(step);
    return result;
  }

  // The step is done: what the next checkpoint records.
  void end_step(int64_t step) {
    train_state_.step = step;
    train_state_.tokens_seen += tokens_per_step() * batch_ranks();
  }

  // The last checkpoint of a run that stops on a data error: step `step` with the data where
  // the failed step began.
  void save_before_stopping(int64_t step, const nlohmann::json& loader_position) {
    loader_state_->save_position(loader_position);
    checkpoints_->save_now(step);
    loader_state_->save_position(std::nullopt);
  }

  // This rank's tokens (tps is per device).
  int64_t tokens_per_step() const {
    return micro_batches_ * cfg_.training.local_batch_size * cfg_.training.seq_len;
  }

  void log_step(int64_t step, const StepResult& r, double seconds,
                std::optional<double> validation_loss) {
    StepMetrics m;
    m.skipped_steps = skipped_steps_;
    m.data_loading_s = loader_->wait_seconds() - data_wait_logged_;
    data_wait_logged_ = loader_->wait_seconds();
    m.documents_read = loader_->documents_read();
    m.validation_loss = validation_loss;
    if (cfg_.training.sft) m.trained_tokens = r.trained_tokens;
    m.max_loss = r.max_loss;
    if (dpo_) m.objective_metrics = dpo_->metrics();
    m.window_steps = step - last_logged_step_;
    m.window_seconds = std::chrono::duration<double>(Clock::now() - last_log_time_).count();
    last_logged_step_ = step;
    last_log_time_ = Clock::now();
    m.tokens_seen = train_state_.tokens_seen;
    add_allocator_counters(precision_.device, m);
    m.memory_reserved_gib = peak_reserved_memory(precision_.device);
    m.step = step;
    m.loss = r.loss;
    m.grad_norm = r.grad_norm;
    m.lr = r.lr;
    std::tie(m.memory_gib, m.memory_percent) = peak_memory(precision_.device);
    // Per device: the tokens this rank's activations hold (MeshContext::local_sequence).
    m.tps = static_cast<double>(micro_batches_ * cfg_.training.local_batch_size *
                                parallel_->local_sequence(cfg_.training.seq_len)) /
            seconds;
    m.tflops = flops_per_token_ * m.tps / 1e12;
    if (peak_flops_) m.mfu = 100.0 * flops_per_token_ * m.tps / *peak_flops_;
    metrics_->log(m);
  }

  const config::TrainerConfig& cfg_;
  // Built by the set-up steps, in this order.
  DistributedSetup dist_;
  Precision precision_;
  std::unique_ptr<distributed::MeshContext> parallel_;
  std::unique_ptr<PlacedLayout> layout_;
  std::shared_ptr<const data::Tokenizer> tokenizer_;
  std::unique_ptr<data::BatchSource> loader_;
  std::optional<ContextParallelBatch> cp_batch_;
  std::optional<Validator> validator_;
  std::optional<DpoRun> dpo_;  // training.objective dpo
  int64_t micro_batches_ = 1;
  std::optional<kernels::OverrideResolver> overrides_;
  const models::ModelSpec* spec_ = nullptr;
  double flops_per_token_ = 0;
  ModelParts parts_;                     // the whole model, or this rank's pipeline stages
  std::optional<Pipeline> pipeline_;     // under pipeline parallelism
  std::optional<lora::LoraSetup> lora_;  // with model.converters = ["lora"]
  std::optional<CausalLmLoss> loss_;
  std::optional<AdamW> optimizer_;
  std::unique_ptr<ForwardBackward> forward_backward_;
  std::vector<at::Tensor> params_;
  std::optional<GlobalGradSquares> grad_squares_;
  std::optional<LRScheduler> scheduler_;
  std::optional<double> peak_flops_;
  // The checkpoint's parts (checkpoint_parts.h) and their manager.
  TrainState train_state_;
  std::optional<ModelState> model_state_;
  std::optional<OptimizerState> optimizer_state_;
  std::optional<LrSchedulerState> scheduler_state_;
  std::optional<DataLoaderState> loader_state_;
  RngState rng_state_;
  std::optional<CheckpointManager> checkpoints_;
  std::optional<MetricsLogger> metrics_;
  std::optional<ProgressLine> progress_;
  std::optional<StepProfiler> profiler_;
  // Installed once set-up is done: a signal before then stops the process as usual.
  std::optional<StopRequest> stop_;
  int64_t skipped_steps_ = 0;
  double data_wait_logged_ = 0;      // the loader's wait up to the last logged step
  int64_t last_logged_step_ = 0;     // and that step
  Clock::time_point last_log_time_;  // and when it was logged
  int64_t first_step_ = 1;
};

}  // namespace

TrainSummary run_training(const config::TrainerConfig& cfg, const std::function<void()>& started) {
  // The layout is checked before anything is built or any rank waits for another.
  DistributedSetup dist = check_distributed_layout(cfg);
  at::manual_seed(static_cast<uint64_t>(cfg.training.seed));
  if (cfg.training.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  Trainer trainer(cfg, std::move(dist), started);
  return trainer.train();
}

}  // namespace titan::train
