#include "training/trainer.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "oml/common/autocast.h"
#include "oml/common/cpu_features.h"
#include "oml/common/logging.h"
#include "oml/common/pending_scalars.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/data/dataset.h"
#include "oml/data/device_copy.h"
#include "oml/data/loader.h"
#include "oml/data/sampler.h"
#include "oml/distributed/from_rank0.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/io/atomic_file.h"
#include "oml/io/checkpoint.h"
#include "oml/io/pending_files.h"
#include "oml/io/state_dict.h"
#include "oml/losses/criterion.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/optim/clipping.h"
#include "oml/optim/grad_scaler.h"
#include "oml/optim/multi_tensor.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/report/profiler.h"
#include "runtime/embedding.h"
#include "runtime/progress.h"
#include "runtime/run_context.h"
#include "runtime/run_dir.h"
#include "training/batch_trace.h"
#include "training/checkpoint_writer.h"
#include "training/early_stopping.h"
#include "training/run_recorder.h"
#include "training/step_graph.h"
#include "training/step_profiler.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

/// Every parameter of `module` as (prefix + name, tensor), trainable or not (a frozen backbone
/// is unfrozen later), for gradient synchronisation.
distributed::NamedTensors named_parameters(const torch::nn::Module& module, const std::string& prefix) {
  distributed::NamedTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    out.emplace_back(prefix + item.key(), item.value());
  return out;
}

/// Every parameter the optimizer updates (what the gradient scaler unscales).
std::vector<at::Tensor> optimized_parameters(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> out;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) out.push_back(p);
  }
  return out;
}

distributed::GradientSyncOptions gradient_sync_options(const config::RunConfig& config) {
  distributed::GradientSyncOptions options;
  options.bucket_mb = config.ddp.bucket_mb;
  options.check_params_every = config.ddp.check_params_every;
  options.compression = config.ddp.gradient_compression;
  return options;
}

data::LoaderOptions training_loader_options(const config::RunConfig& config, int64_t epoch,
                                            const torch::Device& device) {
  data::LoaderOptions options;
  options.num_workers = static_cast<int>(config.num_workers);
  options.seed = static_cast<uint64_t>(config.seed);
  options.epoch = epoch;
  options.pin_memory = device.is_cuda();  // for the side stream's copies (DeviceCopier)
  return options;
}

/// `samples` over the time since `since`, which is reset to now.
double samples_per_second(int64_t samples, std::chrono::steady_clock::time_point& since) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - since).count();
  since = now;
  return seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
}

std::vector<std::string> metric_names(const std::map<std::string, double>& metrics) {
  std::vector<std::string> names;
  for (const auto& kv : metrics) names.push_back(kv.first);
  return names;
}

/// "loss 0.2130 lr 1.00e-03 850 img/s" for progress bars (`unit`: "img", "text").
std::string step_status(double loss, double lr, double samples_per_s, const std::string& unit) {
  char status[96];
  std::snprintf(status, sizeof(status), "loss %.4f lr %.2e %.0f %s/s", loss, lr, samples_per_s, unit.c_str());
  return status;
}

constexpr const char* kLastCheckpoint = "last.ckpt";

constexpr const char* kDeferReadsVariable = "OML_DEFER_STEP_READS";

/// Whether a step's loss and logs are read one step late: on CUDA, where a read makes the host
/// wait for the GPU, unless OML_DEFER_STEP_READS says otherwise — 1: also on the CPU (the tests
/// check that way there), 0: at once, also on CUDA (a non-finite loss then stops the run before
/// its step is applied, for one synchronisation per batch).
bool defer_step_reads(const c10::Device& device) {
  const char* value = std::getenv(kDeferReadsVariable);
  if (value == nullptr || *value == '\0') return device.is_cuda();
  const std::string text = value;
  if (text == "1" || text == "0") return text == "1";
  throw UsageError(std::string(kDeferReadsVariable) +
                   " must be 1 (read a step's loss and logs one step late) or 0 (at once), got '" + text +
                   "'");
}

/// A copy of `state` in host memory that training does not touch (the optimizer updates the
/// model's tensors in place), contiguous as a checkpoint stores it.
io::StateDict host_copy(const io::StateDict& state) {
  io::StateDict out;
  for (const auto& [name, tensor] : state) {
    out.emplace(name, tensor.detach().to(tensor.options().device(torch::kCPU), /*non_blocking=*/false,
                                         /*copy=*/true, at::MemoryFormat::Contiguous));
  }
  return out;
}

std::string best_key(const config::RunConfig& config) { return "best/" + config.metric_for_checkpointing; }

/// ConfigError when the checkpoint's run used another optimizer or scheduler than `config`.
void check_same_components(const std::string& checkpoint_yaml, const std::string& path,
                           const config::RunConfig& config) {
  // Optimizer and scheduler states only load into the kind that wrote them; another kind would
  // fail deep inside LibTorch ("INTERNAL ASSERT FAILED") or, worse, load.
  YAML::Node before;
  try {
    before = YAML::Load(checkpoint_yaml);
  } catch (const YAML::Exception&) {
    return;  // a checkpoint without a readable config: the state loaders report what they find
  }
  auto name_in = [&](const char* key, const char* inner) -> std::string {
    // A config that is not a mapping (a damaged checkpoint) names no components; yaml-cpp throws
    // for a key looked up in a scalar.
    if (!before.IsMap()) return std::string();
    YAML::Node node = before[key];
    if (inner && node.IsMap()) node.reset(node[inner]);
    return node.IsMap() && node["name"].IsScalar() ? node["name"].as<std::string>() : std::string();
  };
  auto check = [&](const std::string& was, const std::optional<config::ComponentSpec>& now,
                   const std::string& key) {
    const std::string current = now ? now->name : std::string();
    if (was == current) return;
    throw ConfigError(key + ": the run in " + path + " trained with " +
                      (was.empty() ? std::string("none") : "'" + was + "'") + ", this config gives " +
                      (current.empty() ? std::string("none") : "'" + current + "'") +
                      "; its state cannot continue under another kind. Resume with the run's " + key +
                      ", or start a new run from the checkpoint's weights (`weights:`, without --resume)");
  };
  check(name_in("optimizer", nullptr), config.optimizer, "optimizer");
  check(name_in("scheduling", "scheduler"), config.scheduling.scheduler, "scheduling.scheduler");
}

}  // namespace

// The gradient scaler's values in train.jsonl (PyTorch's GradScaler: its scale, and the steps it
// skipped).
constexpr const char* kAmpScale = "amp_scale";
constexpr const char* kAmpSkippedSteps = "amp_skipped_steps";

/// An optimizer step's train.jsonl line before the values its device computed are read.
struct PendingStepLog {
  int64_t epoch = 0;
  int64_t step = 0;
  double lr = 0;
  double samples_per_s = 0;
  std::map<std::string, double> host_logs;  ///< known on the host (the gradient scaler's)
  int64_t batches = 0;                      ///< the step's batches: the first values
  std::vector<int64_t> batch_rows;          ///< this rank's rows of each (the epoch mean's weights)
  std::vector<std::string> loss_log_keys;   ///< the loss's log keys: the values after them
  PendingScalars values;
};

RestoredState restore_checkpoint(const std::string& path, const config::RunConfig& config,
                                 const TrainingParts& parts, optim::Scheduler* scheduler,
                                 optim::GradScaler* scaler, EarlyStopping* early_stopping) {
  const io::Checkpoint resumed = io::load_checkpoint(path);
  if (!resumed.resume) {
    throw DataError("checkpoint '" + path +
                    "' has no resume state (it was not written by oml-train); "
                    "resume from a run's checkpoints/last.ckpt");
  }
  check_same_components(resumed.config, path, config);
  io::load_state_dict(*parts.model, resumed.state_dict, path);
  if (parts.criterion)
    io::load_state_dict(*parts.criterion, resumed.resume->criterion, path + " (criterion)");
  try {
    optim::load_optimizer_state(*parts.optimizer, resumed.resume->optimizer);
    if (scheduler) scheduler->load_state(resumed.resume->scheduler);
    // A precision 16 run continues with its scale; one resumed from a bf16/fp32 run's checkpoint
    // (no scaler state) starts from the initial scale, as a new run would.
    if (scaler && !resumed.resume->grad_scaler.isNone()) scaler->load_state(resumed.resume->grad_scaler);
    // Likewise early stopping: a run that had none starts counting now.
    if (early_stopping && !resumed.resume->early_stopping.isNone())
      early_stopping->load_state(resumed.resume->early_stopping);
    optim::load_rng_state(resumed.resume->rng);
  } catch (Error& e) {
    e.add_context("(in the resume state of checkpoint " + path + ")");  // the loaders do not know the file
    throw;
  }
  RestoredState restored;
  const io::ResumeState& r = *resumed.resume;
  restored.position = {r.sampler_epoch, r.sampler_batch, resumed.step};
  restored.logger_run_id = r.logger_run_id;
  restored.training_time_s = r.training_time_s.value_or(0.0);
  restored.best_k_models = r.best_k_models;
  restored.position_is_global = r.sampler_consumed.has_value();
  if (restored.position_is_global) {
    restored.position.consumed = *r.sampler_consumed;
    restored.position.epoch_world_size = *r.sampler_world_size;
  }
  const TrainingPosition& p = restored.position;
  if (p.epoch < 0 || p.batch < 0 || p.step < 0 || p.consumed < 0 || p.epoch_world_size < 1) {
    throw DataError("checkpoint '" + path + "': its training position (epoch " + std::to_string(p.epoch) +
                    ", batch " + std::to_string(p.batch) + ", step " + std::to_string(p.step) +
                    ", consumed " + std::to_string(p.consumed) + " items of the epoch started by " +
                    std::to_string(p.epoch_world_size) + " rank(s)) is not one (a damaged checkpoint?)");
  }
  if (auto it = resumed.metrics.find(best_key(config)); it != resumed.metrics.end())
    restored.best = it->second;
  return restored;
}

Trainer::Trainer(const config::Document& document, const config::RunConfig& config, const RunContext& context,
                 TrainingParts parts, TrainerOptions options)
    : config_(config),
      context_(context),
      parts_(std::move(parts)),
      options_(std::move(options)),
      resolved_yaml_(document.dump()),
      defer_step_reads_(defer_step_reads(context.device)),
      schedule_(config.controls.checkpointing),
      best_checkpoints_(config.controls.checkpointing.save_top_k,
                        config.mode_for_checkpointing == config::CheckpointMode::max) {
  OML_ASSERT(parts_.model && parts_.optimizer && parts_.sampler,
             "a trainer needs a model, an optimizer and a sampler");
  // This rank's share of every epoch; wrapping checks that every rank gets a batch (a
  // ConfigError otherwise) before anything runs.
  share_ = std::make_unique<ddp::DDPSamplerWrapper>(parts_.sampler, ddp_sampler_options(config_),
                                                    context_.rank(), context_.world_size(), config_.seed);
  const int64_t accumulate = config_.controls.accumulate_grad_batches;
  steps_per_epoch_ = (limited_epoch_batches() + accumulate - 1) / accumulate;  // the last group steps too
  scheduler_ = build_scheduler(config_, *parts_.optimizer, steps_per_epoch_);

  // Config mistakes surface before anything is written or trained.
  if (options_.has_validation) check_checkpoint_metric(config_, options_.metric_keys);
  if (scheduler_ && scheduler_->requires_metric()) {
    if (config_.scheduling.scheduler_interval == config::SchedulerInterval::step) {
      throw SettingError("scheduling.scheduler_interval",
                         "this scheduler steps with its monitored value, which exists once per epoch "
                         "(a validation metric, or the training loss's epoch mean): use "
                         "scheduler_interval: epoch");
    }
    monitored_ = check_monitor_metric(config_, options_.metric_keys, options_.loss_name);
    if (monitored_ == MonitoredValue::validation_metric && !options_.has_validation) {
      throw SettingError("scheduling.monitor_metric",
                         "'" + config_.scheduling.monitor_metric +
                             "' is a validation metric, but the dataframe has no validation rows (the "
                             "training loss's epoch mean, '" +
                             training_loss_epoch_key(options_.loss_name) + "', needs none)");
    }
  }
  if (const auto& stopping = config_.controls.early_stopping) {
    if (!options_.has_validation) {
      throw SettingError(
          "early_stopping",
          "early stopping monitors a validation metric, but nothing is validated (the dataframe "
          "has no validation rows, or limit_val_batches leaves none)");
    }
    check_early_stopping_metric(config_, options_.metric_keys);
    early_stopping_ = std::make_unique<EarlyStopping>(*stopping);
  }

  // Built before restore(), which continues a precision 16 run's loss scale from its checkpoint.
  if (context_.precision == config::Precision::fp16) {
    scaler_ = std::make_unique<optim::GradScaler>();
    device_skip_ = dynamic_cast<optim::DeviceSkipping*>(parts_.optimizer);
    if (device_skip_ && !device_skip_->skips_on_device()) device_skip_ = nullptr;
  }
  batch_trace_ = BatchTrace::from_environment(context_.rank(), context_.world_size());
  fs::path resumed_run;
  if (!options_.resume_from.empty()) {
    resumed_run = resumed_run_directory(options_.resume_from);
    restore(options_.resume_from);
  }
  step_ = start_.step;
  claim_run_directory(resumed_run);
  RecorderOptions recording;
  recording.has_validation = options_.has_validation;
  recording.config_yaml = resolved_yaml_;
  if (!options_.resume_from.empty()) {
    recording.resumed_at_step = start_.step;
    if (!resumed_logger_run_id_.empty()) recording.resumed_logger_run_id = resumed_logger_run_id_;
  }
  profiler_ = std::make_unique<StepProfiler>(context_.is_main() ? config_.profile : std::nullopt, paths_.root,
                                             context_.rank(), context_.device.is_cuda());
  recorder_ = std::make_unique<RunRecorder>(config_, context_, paths_.root, std::move(recording));
  if (context_.is_main()) {
    writer_ = std::make_unique<CheckpointWriter>(
        paths_.checkpoints, [this](const fs::path& path) { recorder_->checkpoint_written(path); });
  }
  // last.ckpt holds the resumed position already: nothing to write until training moves on.
  if (!options_.resume_from.empty()) last_written_ = start_;

  // Gradient synchronisation (a no-op in a single process); every rank starts from rank 0's
  // parameters and buffers, as PyTorch's DDP does at construction.
  distributed::NamedTensors synced = named_parameters(*parts_.model, parts_.model_name + ".");
  if (parts_.criterion) {
    for (auto& p : named_parameters(*parts_.criterion, "criterion.")) synced.push_back(std::move(p));
  }
  gradient_sync_ = std::make_unique<distributed::GradientSync>(context_.group, std::move(synced),
                                                               gradient_sync_options(config_));
  for (const auto& b : parts_.model->named_buffers(/*recurse=*/true))
    buffers_.emplace_back(parts_.model_name + "." + b.key(), b.value());
  gradient_sync_->broadcast_from_rank0(buffers_);

  // float16 needs loss scaling (CUDA only: the config rejects 16 on the CPU); bfloat16 has
  // float32's exponent range and needs none.
  if (context_.precision != config::Precision::fp32) {
    log::info("precision " + config::precision_name(context_.precision) + ": " +
              (context_.precision == config::Precision::bf16 ? "bfloat16" : "float16") +
              " autocast for forward and loss on " + context_.device.str() +
              "; weights, optimizer and metrics in float32");
  }
  // Lightning and PyTorch say nothing here, and a bf16 run on such a CPU is 3-25x slower than
  // precision 32 (docs/benchmarks.md).
  if (context_.precision == config::Precision::bf16 && context_.device.is_cpu() && cpu_emulates_bf16()) {
    log::warn(
        "precision bf16: this CPU has no bfloat16 instructions (AVX512-BF16 or AMX), so its bfloat16 "
        "GEMMs and convolutions are emulated and train several times slower than float32; precision 32 "
        "is faster here");
  }
}

Trainer::~Trainer() = default;

void Trainer::claim_run_directory(const fs::path& resumed_run) {
  std::string root;
  if (context_.is_main()) {
    if (resumed_run.empty()) {
      const std::string name =
          config_.run_name.empty() ? default_run_name(config_.postfix) : config_.run_name;
      run_dir_.emplace(RunDir::create(config_.logs_root, name));
      run_dir_->write_config(resolved_yaml_);
    } else {
      run_dir_.emplace(RunDir::reopen(resumed_run));
      // Half-written files of the run's earlier process (killed mid-write); the lock says no
      // live process writes here.
      // Every folder of the run (listed first, then cleaned): the grids' images/epoch_NNN/ hold
      // temporaries too.
      std::vector<fs::path> folders{run_dir_->path()};
      std::error_code ec;
      for (fs::recursive_directory_iterator it(run_dir_->path(), ec), end; !ec && it != end;
           it.increment(ec)) {
        if (it->is_directory(ec) && !it->is_symlink(ec) &&
            it->path().filename().string().find(".tmp-") == std::string::npos)
          folders.push_back(it->path());
      }
      int stale = 0;
      for (const fs::path& folder : folders) stale += io::remove_stale_temporaries(folder);
      if (stale > 0)
        log::info("removed " + std::to_string(stale) + " temporary file(s) of an earlier, killed process");
      const std::string started_with = run_dir_->write_resume_config(resolved_yaml_);
      for (const std::string& change : config_differences(started_with, resolved_yaml_)) {
        // Said plainly where the change does not take: the state restored wins, as in Lightning.
        std::string effect;
        // (scheduling's interval, frequency and monitor_metric are read as configured: they take)
        if (starts_with(change, "optimizer.args.") || starts_with(change, "scheduling.scheduler.args."))
          effect =
              " (not applied: the optimizer's and scheduler's state, learning rates included, is the "
              "checkpoint's)";
        else if (starts_with(change, "logs_root:") || starts_with(change, "run_name:") ||
                 starts_with(change, "logs_folder:"))
          effect = " (no effect: a resumed run stays in its own directory)";
        log::warn("resumed with a config that differs from the run's config.yaml: " + change + effect);
      }
      // What a killed run logged after its last checkpoint is trained again now.
      run_dir_->truncate_logs_after(start_.step);
    }
    root = run_dir_->path().string();
    log::info("run directory: " + root);
  }
  root = context_.from_rank0(root);
  paths_ = {root, fs::path(root) / "checkpoints"};
}

void Trainer::restore(const std::string& path) {
  const RestoredState restored =
      restore_checkpoint(path, config_, parts_, scheduler_.get(), scaler_.get(), early_stopping_.get());
  start_ = restored.position;
  best_checkpoints_.restore(restored.best_k_models, restored.best);
  resumed_logger_run_id_ = restored.logger_run_id;
  time_before_ = restored.training_time_s;
  const int64_t world = context_.world_size();
  if (!restored.position_is_global) {
    // An earlier build counted only this rank-world's steps and did not name the world.
    start_.epoch_world_size = world;
    start_.consumed = start_.batch * share_->items_per_step();
    if (start_.batch > 0) {
      log::warn("checkpoint " + path +
                " was written by an earlier oml-cpp that does not record its number of "
                "ranks; assuming " +
                std::to_string(world) +
                ", as in this run (resumed on another number, "
                "batches of epoch " +
                std::to_string(start_.epoch) + " would repeat or be skipped)");
    }
  }
  log::info("resuming from " + path + " at epoch " + std::to_string(start_.epoch) + ", batch " +
            std::to_string(start_.batch) + " (step " + std::to_string(start_.step) + ")");
  if (start_.epoch >= config_.max_epochs) return;
  // A position this world cannot continue (the data changed; no padding and an uneven rest) is
  // reported now, before the run directory is touched, not when fit() reaches it.
  const ddp::EpochPosition from = resumed_epoch_position();
  share_->batches_from(from);
  if (from.world_size != world && from.consumed > 0) {
    log::info("epoch " + std::to_string(start_.epoch) + " was started by " + std::to_string(from.world_size) +
              " rank(s); these " + std::to_string(world) + " continue it after the " +
              std::to_string(from.consumed) + " " +
              (parts_.sampler->kind() == data::SamplerKind::batch ? "batches" : "indices") +
              " of its order they consumed");
  }
}

ddp::EpochPosition Trainer::resumed_epoch_position() const {
  // An epoch nothing of which was consumed (a new run, a checkpoint written at the end of an
  // epoch) is this world's own: its order is the one these ranks deal.
  if (start_.consumed == 0) return {start_.epoch, 0, context_.world_size()};
  return {start_.epoch, start_.consumed, start_.epoch_world_size};
}

bool Trainer::reached_max_steps() const { return config_.max_steps && step_ >= *config_.max_steps; }

double Trainer::training_time_s() const {
  return time_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_start_).count();
}

bool Trainer::reached_max_time() const {
  const std::optional<double>& limit = config_.controls.max_time_s;
  if (!limit) return false;
  const double elapsed = training_time_s();
  if (!distributed::decision_from_rank0(*context_.group, context_.device, elapsed >= *limit)) return false;
  if (context_.is_main()) {
    log::info(::oml::detail::concat("max_time reached: trained for ", static_cast<int64_t>(elapsed), " s of ",
                                    static_cast<int64_t>(*limit),
                                    " s (Lightning's max_time); stopping after step ", step_));
  }
  return true;
}

int64_t Trainer::limited_epoch_batches() const {
  return config_.controls.limit_train_batches.apply(share_->size(), "limit_train_batches");
}

std::unique_ptr<data::Loader> Trainer::epoch_loader(std::shared_ptr<const data::Dataset> inputs,
                                                    const ddp::EpochPosition& from) const {
  uint64_t digest = 0;
  std::vector<data::Batch> batches = share_->batches_from(from, &digest);
  data::check_batches(*parts_.sampler, batches, from.epoch, inputs->size());
  if (context_.world_size() > 1) {
    // Every rank must deal from one epoch (the sampler contract's determinism); one that drew
    // another would train on duplicated and skipped rows without a word.
    const std::vector<std::string> drawn = context_.group->all_gather_bytes(std::to_string(digest));
    for (std::size_t r = 1; r < drawn.size(); ++r) {
      OML_CHECK(drawn[r] == drawn[0], PluginError, "sampler '", parts_.sampler->name(),
                "' drew another epoch ", from.epoch, " on rank ", r,
                " than on rank 0: an epoch must be a pure function of the seed, the "
                "epoch and the data (docs/contracts.md#sampler: its own generator, seeded from both; never "
                "global random state, the time or the process id)");
    }
  }
  // limit_train_batches counts from the epoch's start, resumed or not (the same on every rank).
  const int64_t done_before = from.consumed / share_->items_per_step();
  const int64_t left = std::max<int64_t>(0, limited_epoch_batches() - done_before);
  if (static_cast<int64_t>(batches.size()) > left) batches.resize(static_cast<std::size_t>(left));
  return std::make_unique<data::Loader>(std::move(inputs), std::move(batches),
                                        training_loader_options(config_, from.epoch, context_.device));
}

void Trainer::fit(std::shared_ptr<const data::Dataset> train_inputs, const TrainingHooks& hooks) {
  OML_ASSERT(hooks.step, "a trainer needs a step function");
  OML_ASSERT(!options_.has_validation || (hooks.validate && hooks.validation_split),
             "a run with validation rows needs a validate hook and its split");
  const int64_t world = context_.world_size();
  const int64_t accumulate = config_.controls.accumulate_grad_batches;
  bool stop = false;
  TrainingPosition position = start_;  // where training stands after the last epoch's end
  // SIGINT/SIGTERM finish the optimizer step under way and write last.ckpt before the process
  // ends. Under DDP the launcher forwards signals to every rank and kills them after a grace
  // period, so there the signal ends the ranks at once, as before.
  const bool interrupts = world == 1 && config_.controls.checkpointing.save_last;
  std::optional<io::InterruptDeferral> deferral;
  if (interrupts) {
    deferral.emplace(
        "finishing the step or validation under way, then writing last.ckpt (send the signal "
        "again to stop at once)");
  }
  std::unique_ptr<data::Loader> next_loader;
  // On a GPU each batch's copy runs on a side stream, beside the previous step's work.
  const data::DeviceCopier copier(context_.device);
  if (config_.cuda_graphs) step_graph_ = make_step_graph(hooks);
  fit_start_ = std::chrono::steady_clock::now();  // max_time counts training, not the setup before
  schedule_.start(fit_start_);
  // A run resumed from a checkpoint written at max_steps has nothing left to do.
  for (int64_t epoch = start_.epoch; epoch < config_.max_epochs && !stop && !reached_max_steps(); ++epoch) {
    std::optional<report::TraceRange> epoch_start(std::in_place, report::phase::epoch_start);
    parts_.model->train();
    if (parts_.criterion) parts_.criterion->train();
    if (hooks.on_epoch_start) hooks.on_epoch_start(epoch);
    if (step_graph_) step_graph_->check_modules();  // a backbone (un)frozen: captured again

    // The epoch from where it stands, as the DDP wrapper deals it to this rank: a fresh one, or
    // the rest of a resumed one, whichever number of ranks started it.
    const bool resumed = epoch == start_.epoch;
    const ddp::EpochPosition from = resumed ? resumed_epoch_position() : ddp::EpochPosition{epoch, 0, world};
    // A fresh epoch's loader was started during the previous epoch's last step (below).
    std::unique_ptr<data::Loader> loader =
        next_loader ? std::move(next_loader) : epoch_loader(train_inputs, from);
    epoch_start.reset();
    const int64_t epoch_batches = loader->num_batches();
    epoch_loss_sum_ = 0;
    epoch_loss_rows_ = 0;
    Progress progress("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config_.max_epochs),
                      epoch_batches, "batch");
    int64_t batches_done = 0;
    // Where training stands after `done` batches of this epoch: each of the `world` ranks took
    // `done` batches, together the next done x items_per_step items of the global order.
    const auto inside_epoch = [&](int64_t done) {
      return TrainingPosition{epoch, (resumed ? start_.batch : 0) + done, step_,
                              from.consumed + done * share_->items_per_step(), from.world_size};
    };
    // The batches of the current optimizer step: their mean loss and their samples are logged.
    std::vector<at::Tensor> step_losses;  // one per batch (accumulate_batch)
    std::vector<int64_t> step_rows;       // and its rows on this rank
    int64_t step_batches = 0, step_samples = 0;
    auto step_start = std::chrono::steady_clock::now();
    for (;;) {
      // A step's trace range starts before its first batch arrives (the data wait is its own);
      // the call that finds the epoch's end belongs to no step.
      const bool batch_due = batches_done < epoch_batches;
      if (step_batches == 0 && batch_due) profiler_->step_begins(step_ + 1);
      std::optional<data::LoadedBatch> batch;
      {
        std::optional<report::TraceRange> wait;
        if (batch_due) wait.emplace(report::phase::data_wait);
        batch = loader->next();
        if (batch) copier.to_device(*batch);
      }
      if (!batch) break;
      // The epoch's last batch is in hand: the next epoch's loader starts on its first batches
      // while this step runs, instead of after the epoch's end. With short epochs (OML's balance
      // sampler makes one batch of 10 labels an epoch) every step would otherwise wait for its
      // images. Dropped unused if training stops here.
      if (batches_done + 1 == epoch_batches && epoch + 1 < config_.max_epochs)
        next_loader = epoch_loader(train_inputs, {epoch + 1, 0, world});
      if (batch_trace_) batch_trace_->record(epoch, step_ + 1, batch->indices);
      // Lightning steps after every accumulate_grad_batches-th batch and after the epoch's last.
      const bool first = step_batches == 0;
      const bool last = step_batches + 1 == accumulate || batches_done + 1 == epoch_batches;
      std::map<std::string, at::Tensor> logs;  // the step's last batch's are logged
      if (hooks.check) hooks.check(*batch);
      step_losses.push_back(step_graph_ ? graph_step(*batch, hooks, epoch, logs)
                                        : accumulate_batch(*batch, hooks, epoch, first, last, logs));
      step_rows.push_back(batch->indices.size(0));
      ++batches_done;
      ++step_batches;
      step_samples += batch->indices.size(0) * world;
      if (!last) {
        progress.advance(1, "");
        continue;
      }
      auto line = std::make_unique<PendingStepLog>();
      if (step_graph_) {
        count_step(line->host_logs, logs);  // the graph's step took the optimizer's
      } else {
        optimizer_step(line->host_logs, logs);
      }
      std::optional<report::TraceRange> logging(std::in_place, report::phase::logging);
      line->epoch = epoch;
      line->step = step_;
      line->lr = parts_.optimizer->param_groups().at(0).options().get_lr();
      line->samples_per_s = samples_per_second(step_samples, step_start);
      line->batches = step_batches;
      line->batch_rows = std::move(step_rows);
      step_rows.clear();
      std::vector<at::Tensor> values = std::move(step_losses);
      for (auto& [key, value] : logs) {
        line->loss_log_keys.push_back(key);
        values.push_back(std::move(value));
      }
      line->values = PendingScalars(values);  // queues the copy of the device's values
      step_losses.clear();
      step_batches = step_samples = 0;
      log_step(std::move(line));
      progress.advance(1, step_status_);
      logging.reset();
      profiler_->step_ends(step_);
      if (reached_max_steps() || reached_max_time()) {
        stop = true;
        break;
      }
      after_step(inside_epoch(batches_done), batches_done == epoch_batches);
    }
    // Before validation and the epoch's checkpoints: the last step's loss is checked first
    // (deferred reads only: a trace shows this logging between the steps).
    if (unread_step_) {
      const report::TraceRange logging(report::phase::logging);
      write_unread_step();
    }
    progress.finish(step_status_);
    {
      const report::TraceRange epoch_end(report::phase::epoch_end);
      // BatchNorm statistics are updated locally on each rank; as PyTorch's DDP does
      // (broadcast_buffers), rank 0's buffers are the model's, so every rank validates and
      // checkpoints the same model that a single process would load from best.ckpt.
      if (world > 1) distributed::broadcast_from_rank0(*context_.group, buffers_);
      // Stopped inside the epoch (max_steps or max_time, after an optimizer step): the position
      // after the batches taken; else the next epoch's start.
      position = batches_done < epoch_batches ? inside_epoch(batches_done)
                                              : TrainingPosition{epoch + 1, 0, step_, 0, world};
      if (end_epoch(epoch, position, stop, hooks)) stop = true;
    }
    if (io::deferred_interrupt() != 0) stop_for_interrupt(position);
  }
  if (step_graph_) log::info("cuda_graphs: " + std::to_string(step_graph_->replays()) + " steps replayed");
  finish(position);
}

std::unique_ptr<StepGraph> Trainer::make_step_graph(const TrainingHooks& hooks) const {
  StepGraphConditions conditions;
  conditions.device = context_.device;
  conditions.world_size = context_.world_size();
  conditions.precision = context_.precision;
  conditions.accumulate_grad_batches = config_.controls.accumulate_grad_batches;
  conditions.deferred_reads = defer_step_reads_;
  conditions.pipeline_problem = hooks.capture_problem;
  optim::CapturableOptimizer* optimizer =
      capturable_optimizer(*parts_.optimizer, conditions.optimizer_problem);
  const std::string problem = step_graph_problem(conditions);
  if (!problem.empty()) {
    log::warn("cuda_graphs: true, but " + problem + ": training steps run eagerly");
    return nullptr;
  }
  log::info("cuda_graphs: the training step is captured into a CUDA graph after " +
            std::to_string(StepGraph::kWarmupSteps) + " eager steps (the optimizer takes its fused kernel)");
  return std::make_unique<StepGraph>(context_.device, *optimizer,
                                     std::vector<torch::nn::Module*>{parts_.model, parts_.criterion});
}

at::Tensor Trainer::graph_step(const data::LoadedBatch& batch, const TrainingHooks& hooks, int64_t epoch,
                               std::map<std::string, at::Tensor>& logs) {
  // A step of one batch (step_graph_problem: accumulate_grad_batches 1, deferred reads, no
  // scaler): the eager step's forward and backward, then the optimizer's step.
  losses::LossOutput out = step_graph_->step(batch, [&](const data::LoadedBatch& inputs) {
    losses::LossOutput step;
    step.loss = accumulate_batch(inputs, hooks, epoch, /*first=*/true, /*last=*/true, step.logs);
    const report::TraceRange optimizer(report::phase::optimizer);
    apply_gradients();
    return step;
  });
  logs = std::move(out.logs);
  return out.loss;
}

at::Tensor Trainer::accumulate_batch(const data::LoadedBatch& batch, const TrainingHooks& hooks,
                                     int64_t epoch, bool first, bool last,
                                     std::map<std::string, at::Tensor>& logs) {
  // Mixed precision: autocast around the forward and the loss only, never around backward or
  // the optimizer. Parameters, their gradients and the optimizer state stay float32.
  losses::LossOutput out;
  {
    // Under a CUDA graph the casts of the weights are not cached across the capture's boundary
    // (autocast.h).
    const AutocastGuard autocast(context_.precision, context_.device, /*cache_casts=*/step_graph_ == nullptr);
    out = hooks.step(batch);
  }
  at::Tensor logged;
  if (defer_step_reads_) {
    logged = out.loss.detach();  // read with the step's log line (write_step_log)
  } else {
    const report::TraceRange logging(report::phase::logging);  // the loss read back
    logged = at::scalar_tensor(mean_finite_loss(out.loss, epoch), at::kDouble);
  }

  if (first) optim::zero_grad(*parts_.optimizer);
  // Lightning divides every batch's loss by accumulate_grad_batches (the epoch's last, shorter
  // group's too): the step's gradient is the mean of its batches' when they all count.
  const int64_t accumulate = config_.controls.accumulate_grad_batches;
  at::Tensor loss = accumulate > 1 ? out.loss / static_cast<double>(accumulate) : out.loss;
  // Batches before a step's last keep their gradients on this rank (no communication); the
  // last one's backward all-reduces everything accumulated, once (GradientSync's contract).
  gradient_sync_->accumulate_locally(!last);
  // The only backward() of training; GradientSync's hooks all-reduce buckets. Under fp16 the
  // loss is scaled so that small gradients survive float16.
  const report::TraceRange backward(report::phase::backward);
  (scaler_ ? scaler_->scale(loss) : loss).backward();
  if (last) gradient_sync_->finish();
  logs = std::move(out.logs);
  return logged;
}

void Trainer::optimizer_step(std::map<std::string, double>& logs,
                             std::map<std::string, at::Tensor>& device_logs) {
  const report::TraceRange range(report::phase::optimizer);
  apply_gradients();
  count_step(logs, device_logs);
}

void Trainer::apply_gradients() {
  bool apply = true;
  if (device_skip_) {
    // torch.amp.GradScaler.step's way with a fused optimizer: the kernel reads found_inf. A
    // skipped step is reported when its logs are read (write_step_log).
    scaler_->unscale_in_place(optimized_parameters(*parts_.optimizer));
    device_skip_->skip_next_step_if(scaler_->found_inf());
  } else if (scaler_) {
    // Every rank holds the same averaged gradients, so every rank takes the same decision.
    apply = scaler_->unscale(optimized_parameters(*parts_.optimizer));
    if (!apply) {
      log::warn("step " + std::to_string(step_ + 1) + " skipped: non-finite gradients at fp16 loss scale " +
                std::to_string(scaler_->current_scale()) + " (" + std::to_string(scaler_->skipped_steps()) +
                " skipped so far); the scale is lowered");
    }
  }
  // As Lightning: on the unscaled, synchronised gradients, right before the step.
  const auto& controls = config_.controls;
  if (apply && controls.gradient_clip_val) {
    optim::clip_gradients(optimized_parameters(*parts_.optimizer), *controls.gradient_clip_val,
                          controls.gradient_clip_algorithm);
  }
  if (apply) parts_.optimizer->step();
}

void Trainer::count_step(std::map<std::string, double>& logs,
                         std::map<std::string, at::Tensor>& device_logs) {
  if (scaler_) {
    scaler_->update();
    if (device_skip_) {
      device_logs[kAmpScale] = scaler_->scale_tensor();
      device_logs[kAmpSkippedSteps] = scaler_->skipped_steps_tensor();
    } else {
      logs[kAmpScale] = scaler_->current_scale();
      logs[kAmpSkippedSteps] = static_cast<double>(scaler_->skipped_steps());
    }
  }
  ++step_;
  const auto& scheduling = config_.scheduling;
  if (scheduler_ && scheduling.scheduler_interval == config::SchedulerInterval::step &&
      step_ % scheduling.scheduler_frequency == 0) {
    scheduler_->step();
  }
}

void Trainer::add_to_epoch_loss(double batch_loss, int64_t rows) {
  epoch_loss_sum_ += batch_loss * static_cast<double>(rows);
  epoch_loss_rows_ += rows;
}

double Trainer::epoch_training_loss() const {
  // The batches' losses are already means over the ranks; only the weights (this rank's batch
  // rows) could differ, so every rank takes rank 0's value and steps its scheduler alike.
  double mean = epoch_loss_rows_ > 0 ? epoch_loss_sum_ / static_cast<double>(epoch_loss_rows_)
                                     : std::numeric_limits<double>::quiet_NaN();
  if (context_.world_size() > 1) {
    mean = distributed::values_from_rank0(*context_.group, context_.device, {{"loss", mean}}).at("loss");
  }
  if (std::isnan(mean)) {
    throw SettingError("scheduling.monitor_metric",
                       "'" + config_.scheduling.monitor_metric +
                           "' (the training loss's epoch mean) has no value: the "
                           "epoch trained no batch");
  }
  return mean;
}

double Trainer::mean_finite_loss(const at::Tensor& loss, int64_t epoch) const {
  // Every rank learns the global mean loss (for the log) and whether any rank diverged.
  at::Tensor value = loss.detach().to(torch::kCPU).to(torch::kDouble).reshape({1});
  context_.group->all_reduce(value);
  const double mean = value.item<double>() / static_cast<double>(context_.world_size());
  if (!std::isfinite(mean))
    throw_non_finite_loss(mean, epoch, step_ + 1, "training stopped before applying that step");
  return mean;
}

void Trainer::throw_non_finite_loss(double loss, int64_t epoch, int64_t step,
                                    const std::string& stopped) const {
  const std::string where = "epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(step);
  const fs::path last = paths_.checkpoints / "last.ckpt";
  throw RuntimeError("the loss became " + std::string(std::isnan(loss) ? "NaN" : "infinite") + " at " +
                     where + "; " + stopped + ". " +
                     (fs::exists(last) ? "The last good checkpoint is " + last.string()
                                       : std::string("No checkpoint was written yet")) +
                     "; lower the learning rate or check the data");
}

void Trainer::log_step(std::unique_ptr<PendingStepLog> line) {
  if (!defer_step_reads_) {
    write_step_log(*line);
    return;
  }
  // This step's values are still being computed on the device; the previous step's are done,
  // or nearly (this step's work is queued behind them): that one's line is written now.
  std::unique_ptr<PendingStepLog> previous = std::move(unread_step_);
  unread_step_ = std::move(line);
  if (previous) write_step_log(*previous);
}

void Trainer::write_unread_step() {
  if (!unread_step_) return;
  const std::unique_ptr<PendingStepLog> line = std::move(unread_step_);
  write_step_log(*line);
}

void Trainer::warn_of_skipped_step(const PendingStepLog& line, const std::vector<double>& values) {
  const auto key = std::find(line.loss_log_keys.begin(), line.loss_log_keys.end(), kAmpSkippedSteps);
  const auto scale = std::find(line.loss_log_keys.begin(), line.loss_log_keys.end(), kAmpScale);
  if (key == line.loss_log_keys.end() || scale == line.loss_log_keys.end()) return;
  const auto at = [&](auto it) {
    return values[static_cast<std::size_t>(line.batches + (it - line.loss_log_keys.begin()))];
  };
  const double skipped = at(key);
  if (skipped <= skipped_steps_logged_) return;
  skipped_steps_logged_ = skipped;
  log::warn("step " + std::to_string(line.step) +
            " skipped: non-finite gradients at fp16; the loss scale is lowered to " +
            std::to_string(at(scale)) + " (" + std::to_string(static_cast<int64_t>(skipped)) +
            " skipped so far)");
}

void Trainer::write_step_log(PendingStepLog& line) {
  const std::vector<double>& values = line.values.read();
  const auto batches = static_cast<std::size_t>(line.batches);
  OML_ASSERT(values.size() == batches + line.loss_log_keys.size() && line.batch_rows.size() == batches);
  double step_loss = 0;
  if (defer_step_reads_) {
    // Each rank's own batch losses: their mean over the ranks, and whether any rank diverged,
    // as mean_finite_loss learns them per batch where reading is free.
    at::Tensor losses = at::tensor(at::ArrayRef<double>(values.data(), batches), at::kDouble);
    context_.group->all_reduce(losses);
    const auto summed = losses.accessor<double, 1>();
    for (std::size_t i = 0; i < batches; ++i) {
      const double mean = summed[static_cast<int64_t>(i)] / static_cast<double>(context_.world_size());
      if (!std::isfinite(mean)) {
        throw_non_finite_loss(mean, line.epoch, line.step,
                              "training stopped when the step's loss was read (on CUDA after the next "
                              "step was queued: that step and at most the one after it were applied, "
                              "no validation and no checkpoint saw them)");
      }
      step_loss += mean;
      add_to_epoch_loss(mean, line.batch_rows[i]);
    }
  } else {
    for (std::size_t i = 0; i < batches; ++i) {
      step_loss += values[i];  // already over the ranks
      add_to_epoch_loss(values[i], line.batch_rows[i]);
    }
  }
  const double mean_loss = step_loss / static_cast<double>(batches);
  if (device_skip_) warn_of_skipped_step(line, values);
  if (context_.is_main()) {
    nlohmann::json record{{"loss", mean_loss}, {"samples_per_s", line.samples_per_s}};
    for (std::size_t i = 0; i < line.loss_log_keys.size(); ++i)
      record[line.loss_log_keys[i]] = values[batches + i];
    for (const auto& kv : line.host_logs) record[kv.first] = kv.second;
    record["epoch"] = line.epoch;
    record["step"] = line.step;
    record["lr"] = line.lr;
    recorder_->train_step(record);
  }
  step_status_ = step_status(mean_loss, line.lr, line.samples_per_s, options_.item_unit);
}

void Trainer::write_checkpoints(const TrainingPosition& next, std::vector<std::string> files,
                                std::vector<std::string> remove) {
  if (!context_.is_main() || files.empty()) return;
  if (std::find(files.begin(), files.end(), kLastCheckpoint) != files.end()) last_written_ = next;
  const std::map<std::string, double> metrics = with_best(last_metrics_);
  // The snapshot is all the training thread pays: copies in host memory, the optimizer's state
  // serialised. The writer's thread does the rest (serialising, writing, fsync, rename).
  const report::TraceRange range(report::phase::checkpoint);
  writer_->write([&] {
    const auto start = std::chrono::steady_clock::now();
    io::Checkpoint checkpoint;
    checkpoint.state_dict = host_copy(io::state_dict(*parts_.model));
    checkpoint.config = resolved_yaml_;
    checkpoint.epoch = next.epoch;
    checkpoint.step = next.step;
    checkpoint.metrics = metrics;
    io::ResumeState resume;
    resume.optimizer = optim::save_optimizer_state(*parts_.optimizer);
    resume.scheduler = scheduler_
                           ? scheduler_->state()
                           : c10::IValue(c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
    if (parts_.criterion) resume.criterion = host_copy(io::state_dict(*parts_.criterion));
    resume.sampler_epoch = next.epoch;
    resume.sampler_batch = next.batch;
    resume.sampler_consumed = next.consumed;
    resume.sampler_world_size = next.epoch_world_size;
    resume.rng = optim::save_rng_state();
    if (scaler_) resume.grad_scaler = scaler_->state();
    if (early_stopping_) resume.early_stopping = early_stopping_->state();
    resume.logger_run_id = recorder_->logger_run_id();
    resume.training_time_s = training_time_s();
    // save_top_k 1 needs only the best value, which every checkpoint's metrics carry.
    if (config_.controls.checkpointing.save_top_k != 1) resume.best_k_models = best_checkpoints_.kept();
    checkpoint.resume = std::move(resume);
    log::debug(
        "checkpoint snapshot at step " + std::to_string(next.step) + " for " + join(files) + ": " +
        std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) +
        " s (training thread)");
    return CheckpointWriter::Job{std::move(checkpoint), std::move(files), std::move(remove)};
  });
}

void Trainer::write_last(const TrainingPosition& next) {
  if (!config_.controls.checkpointing.save_last || last_written_ == next) return;
  write_checkpoints(next, {kLastCheckpoint});
}

void Trainer::after_step(const TrainingPosition& here, bool epoch_ends) {
  if (context_.is_main()) {
    writer_->check();  // a failed write stops the run at the next step
    if (schedule_.after_step(step_, std::chrono::steady_clock::now())) {
      // Due at an epoch's last step: written at the epoch's end, after its validation, once.
      if (epoch_ends) {
        last_due_at_epoch_end_ = true;
      } else {
        // The unread step's loss is checked before the checkpoint holds it. Reading is collective
        // under DDP, and this is rank 0's decision alone: there the step goes unchecked into it
        // (docs/training.md#a-non-finite-loss).
        if (context_.world_size() == 1) write_unread_step();
        write_last(here);
      }
    }
  }
  if (io::deferred_interrupt() != 0) stop_for_interrupt(here);
}

void Trainer::stop_for_interrupt(const TrainingPosition& here) {
  try {
    write_unread_step();  // a single process (the only one interrupted so): its last step's line
    write_last(here);
    writer_->wait();
    log::info("last.ckpt holds step " + std::to_string(here.step) + " (epoch " +
              std::to_string(here.epoch + 1) + "); continue with --resume " +
              (paths_.checkpoints / kLastCheckpoint).string());
  } catch (const std::exception& e) {
    log::error(std::string("the interrupted run's last.ckpt could not be written: ") + e.what());
  }
  profiler_->finish(step_);  // after the checkpoint, which the user is waiting for
  io::end_deferred_interrupt();
}

std::map<std::string, double> Trainer::with_best(std::map<std::string, double> metrics) const {
  // Every checkpoint carries the best value so far, so a run resumed from it keeps selecting
  // best.ckpt correctly.
  if (const auto best = best_checkpoints_.best()) metrics[best_key(config_)] = *best;
  return metrics;
}

bool Trainer::end_epoch(int64_t epoch, const TrainingPosition& next, bool stopping,
                        const TrainingHooks& hooks) {
  const auto& scheduling = config_.scheduling;
  const bool per_step = scheduling.scheduler_interval == config::SchedulerInterval::step;

  const bool last_epoch = epoch + 1 == config_.max_epochs || stopping;
  bool early_stopped = false;
  std::optional<metrics::EmbeddingMetricsResult> validated;
  if (options_.has_validation && ((epoch + 1) % config_.valid_period == 0 || last_epoch)) {
    {
      const report::TraceRange range(report::phase::validation);
      validated = hooks.validate();
    }
    const metrics::EmbeddingMetricsResult& computed = *validated;
    // Metrics are computed once (rank 0); every rank needs them to agree on "best", on the
    // scheduler's step and on early stopping, so each decides alike from rank 0's values.
    last_metrics_ = distributed::values_from_rank0(*context_.group, context_.device, computed.metrics);
    const std::string& key = config_.metric_for_checkpointing;
    if (!last_metrics_.count(key)) {
      throw SettingError("metric_for_checkpointing", "'" + key + "' is not among the computed metrics: " +
                                                         join(metric_names(last_metrics_)));
    }
    if (context_.is_main())
      print_metrics_table(last_metrics_, "validation after epoch " + std::to_string(epoch + 1) + ":");
    if (scheduler_ && !per_step && scheduler_->requires_metric() &&
        monitored_ == MonitoredValue::validation_metric) {
      // reduce_on_plateau steps with the monitored value at validation epochs.
      const auto monitored = last_metrics_.find(scheduling.monitor_metric);
      if (monitored == last_metrics_.end()) {
        // A category's key (checked for its stem before training) exists only when the
        // validation rows have that category.
        throw SettingError("scheduling.monitor_metric",
                           "'" + scheduling.monitor_metric + "' is not among the validation metrics" +
                               did_you_mean(scheduling.monitor_metric, metric_names(last_metrics_)) +
                               "; computed: " + join(metric_names(last_metrics_)));
      }
      scheduler_->step(monitored->second);
    }
    // As Lightning's EarlyStopping at the end of validation (every rank decides alike: the
    // metrics are rank 0's). Its state goes into this epoch's checkpoints below.
    if (early_stopping_) {
      const auto monitored = last_metrics_.find(early_stopping_->monitor());
      if (monitored == last_metrics_.end()) {
        throw SettingError("early_stopping.monitor",
                           "'" + early_stopping_->monitor() +
                               "' is not among the computed metrics: " + join(metric_names(last_metrics_)));
      }
      if (early_stopping_->update(monitored->second)) {
        early_stopped = true;
        if (context_.is_main()) {
          log::info("early stopping after epoch " + std::to_string(epoch + 1) + ": " +
                    early_stopping_->reason());
        }
      }
    }
  }
  if (scheduler_ && !per_step && !scheduler_->requires_metric() &&
      (epoch + 1) % scheduling.scheduler_frequency == 0) {
    scheduler_->step();
  }
  // As Lightning steps a plateau scheduler that monitors OML's `<criterion>_loss_epoch`: at
  // every scheduler_frequency-th epoch's end, after validation, with the epoch's mean loss.
  if (scheduler_ && scheduler_->requires_metric() && monitored_ == MonitoredValue::training_loss &&
      (epoch + 1) % scheduling.scheduler_frequency == 0) {
    scheduler_->step(epoch_training_loss());
  }
  // The checkpoints due, from one snapshot after everything this epoch's end changes (the
  // schedulers, early stopping): the kept best ones, then last.ckpt the same bytes, last (the
  // writer's commit point: a resume never starts past a best.ckpt not yet written).
  const CheckpointSchedule::EpochEnd due = schedule_.at_epoch_end(epoch, validated.has_value());
  std::vector<std::string> files, removed;
  if (validated && due.compare_top_k) {
    const BestCheckpoints::Decision kept =
        best_checkpoints_.offer(last_metrics_.at(config_.metric_for_checkpointing), epoch, step_);
    if (kept.save) {
      files.push_back(kept.file);
      if (kept.is_best) best_metrics_ = last_metrics_;
      if (kept.is_best && kept.file != kBestCheckpoint) files.push_back(kBestCheckpoint);
      if (kept.removed) removed.push_back(*kept.removed);
    }
  }
  if ((due.write_last || last_due_at_epoch_end_) && config_.controls.checkpointing.save_last &&
      last_written_ != next)
    files.push_back(kLastCheckpoint);
  last_due_at_epoch_end_ = false;
  // The validation's record (metrics.jsonl, the logger, grids, the report) before the checkpoint
  // that comes after it: a run killed between the two resumes from the previous last.ckpt, which
  // cuts the logs back to its step and records this validation again. The other order lost the
  // record for good (a kill after the rename of last.ckpt). The logger and the grids are best
  // effort; only a failing metrics.jsonl (a full disk, which the checkpoint would meet too) stops
  // the run here.
  if (validated) recorder_->validation(epoch, step_, *validated, *hooks.validation_split);
  write_checkpoints(next, std::move(files), std::move(removed));
  recorder_->end_of_epoch();
  context_.group->barrier();
  return early_stopped;
}

void Trainer::finish(const TrainingPosition& final) {
  if (context_.is_main()) {
    write_last(final);
    writer_->wait();  // every checkpoint in place, or the error of the one that is not
  }
  profiler_->finish(step_);
  recorder_->finish();
  if (!context_.is_main()) return;
  if (!best_metrics_.empty()) {
    print_metrics_table(best_metrics_, "best checkpoint (" + config_.metric_for_checkpointing +
                                           "): " + (paths_.checkpoints / "best.ckpt").string());
  }
  log::info("training finished after " + std::to_string(step_) + " steps; run directory " +
            paths_.root.string());
  log::info("run report: " + (paths_.root / "report.html").string());
}

}  // namespace oml::pipelines
