#pragma once
// The one training loop of oml-train. A pipeline (extractor, pairwise) builds its parts — the
// model, the loss, the optimizer, the sampler, the training inputs — and a step function that
// turns a batch into a loss; the Trainer does everything else, in the order DDP correctness
// depends on, for every pipeline alike:
//
//   for each epoch from the resume position:
//     model.train(); hooks.on_epoch_start(epoch)            // e.g. (un)freezing a backbone
//     for each remaining batch of the sampler's epoch (up to limit_train_batches):
//       hooks.check(batch); loss = hooks.step(batch)        // the pipeline's checks, forward
//       CPU: mean loss over the ranks; stop on NaN/Inf naming the step (before it is applied)
//       zero_grad (first batch of a step); backward of loss / accumulate_grad_batches
//       every accumulate_grad_batches-th batch and the epoch's last one:
//         gradient sync (one all-reduce per step); clipping; optimizer step; per-step scheduler
//         log (train.jsonl, logger, progress with throughput); stop at max_steps
//         (CUDA: the step's loss and logs are read, averaged over the ranks and checked when
//         the next step is queued or the epoch ends, so no step waits for the GPU: a step's
//         log line is written one step late)
//       checkpoint triggers (every_n_train_steps, train_time_interval); an interrupt ends here
//     broadcast BatchNorm buffers from rank 0
//     validate when due (hooks.validate), early stopping, per-epoch schedulers, the checkpoints
//     due (best.ckpt / the k best on improvement, last.ckpt at the epoch trigger), barrier
//   last.ckpt at the end
//
// Checkpoints are written by rank 0's CheckpointWriter, off the training thread: a snapshot of
// the state in host memory is all a checkpoint costs the loop. When they are due is the
// CheckpointSchedule's (Lightning's ModelCheckpoint triggers), which of them are kept
// BestCheckpoints'.
//
// What neighbouring features add has one place each:
//   - a forward under autocast (mixed precision, `precision:`): an AutocastGuard around
//     `hooks.step` in Trainer::accumulate_batch, plus the GradScaler for float16;
//   - gradient communication (compression, overlap): the GradientSync the Trainer owns;
//   - the step captured into a CUDA graph and replayed (`cuda_graphs:`): the StepGraph, which
//     Trainer::graph_step hands the whole step (training/step_graph.h);
//   - a trace of chosen steps (`profile:`): the StepProfiler, around phases named with
//     report::TraceRange (data wait, backward, optimizer, logging here; forward and loss in
//     the pipelines' hooks.step);
//   - where a run resumes (also on another number of ranks): TrainingPosition, restored in the
//     constructor and written into every checkpoint by save_checkpoint; fit() takes each epoch
//     (a resumed one's rest too) from this rank's DDPSamplerWrapper.
// docs/training.md describes the loop for users and for authors of new pipelines.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/config/run_config.h"
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "runtime/pipeline_setup.h"
#include "runtime/run_dir.h"
#include "training/best_checkpoints.h"
#include "training/checkpoint_schedule.h"

namespace at {
class Tensor;
}  // namespace at
namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
namespace oml::config {
class Document;
}  // namespace oml::config
namespace oml::optim {
class DeviceSkipping;
class GradScaler;
class Scheduler;
}  // namespace oml::optim
namespace oml::data {
class Dataset;
class Loader;
class Sampler;
struct LoadedBatch;
struct DataSplit;
}  // namespace oml::data
namespace oml::losses {
struct LossOutput;
}  // namespace oml::losses
namespace oml::metrics {
struct EmbeddingMetricsResult;
}  // namespace oml::metrics
namespace oml::distributed {
class GradientSync;
}  // namespace oml::distributed

namespace oml::pipelines {

struct RunContext;
class BatchTrace;
class CheckpointWriter;
class EarlyStopping;
class RunRecorder;
class StepGraph;
class StepProfiler;
struct PendingStepLog;

/// Where the run writes: logs_root/run_name (or the resumed run's directory) and its checkpoints.
struct RunPaths {
  std::filesystem::path root;
  std::filesystem::path checkpoints;
};

/// What a pipeline trains. Checkpoints hold `model`'s state dict (what oml-validate and
/// oml-predict load); resume state holds the criterion, optimizer, scheduler and RNG.
struct TrainingParts {
  torch::nn::Module* model = nullptr;
  /// Prefix of the model's parameters in gradient-sync error messages ("extractor.").
  std::string model_name;
  torch::nn::Module* criterion = nullptr;  ///< loss parameters (ArcFace weights); may be null
  torch::optim::Optimizer* optimizer = nullptr;
  /// The train split's sampler as the config builds it (build_train_sampler), not wrapped: the
  /// Trainer wraps it in this rank's DDPSamplerWrapper, which deals every epoch and the rest of
  /// a resumed one.
  std::shared_ptr<const data::Sampler> sampler;
};

/// How this run starts; filled by the command, not read from the command line by the Trainer.
struct TrainerOptions {
  /// A checkpoint of an earlier run to continue (`oml-train --resume`); empty: a new run.
  std::string resume_from;
  /// Whether the dataframe has validation rows; without them nothing is validated and
  /// best.ckpt is never written.
  bool has_validation = false;
  /// The OVERALL metric keys validation will produce (the run's MetricTable::overall_keys()):
  /// metric_for_checkpointing and a scheduler's monitor_metric are checked against them before
  /// anything runs.
  std::vector<std::string> metric_keys;
  /// The training loss's name as OML logs it (losses::training_loss_name: "triplet_loss",
  /// "arcface_loss", "loss"): a scheduler may monitor its epoch mean as "<loss_name>_epoch".
  std::string loss_name = "loss";
  /// What the throughput counts in progress bars: "img" or "text" (RunInputs::unit()).
  std::string item_unit = "img";
};

/// Where training stands: the sampler's epoch, how much of it has been consumed, and the number
/// of optimizer steps taken. Checkpoints store the position to continue from.
struct TrainingPosition {
  int64_t epoch = 0;
  /// Batches of `epoch` taken so far, by every run that worked on it (for messages; an epoch
  /// continued on another number of ranks mixes batches of both worlds). A run stops inside an
  /// epoch only after an optimizer step (max_steps), so no accumulated gradient is ever lost.
  int64_t batch = 0;
  int64_t step = 0;
  /// Items of the epoch's global order consumed by all ranks together, and the number of ranks
  /// that started the epoch (ddp::EpochPosition): what any number of ranks continues from.
  int64_t consumed = 0;
  int64_t epoch_world_size = 1;

  bool operator==(const TrainingPosition&) const = default;
};

/// What `oml-train --resume` takes from a checkpoint.
struct RestoredState {
  TrainingPosition position;
  /// False for a checkpoint of an earlier build: it names neither the items consumed nor the
  /// world size, only `batch` steps of the world that wrote it (position.consumed and
  /// epoch_world_size are then left at their defaults).
  bool position_is_global = true;
  std::optional<double> best;  ///< the run's best value of metric_for_checkpointing so far
  std::string logger_run_id;   ///< the tracker run to continue ("" for none)
  double training_time_s = 0;  ///< seconds trained before (max_time counts them); 0 if not kept
  /// The checkpoints save_top_k kept, with their values (empty: none recorded).
  std::vector<std::pair<std::string, double>> best_k_models;
};

/// Reads the checkpoint at `path` into `parts` (the model's and the criterion's tensors, the
/// optimizer's state), `scheduler` (null: none), `scaler` (null: none; a checkpoint of a run
/// without one leaves it at its initial scale), `early_stopping` (null: none; likewise) and the
/// random generator, after checking that
/// its run used the optimizer and scheduler kinds `config` names. DataError when the file is
/// not a checkpoint with resume state or its state does not fit; ConfigError when the kinds
/// differ. The Trainer's constructor calls it before touching the run directory (and the fuzz
/// tests call it on damaged checkpoints).
RestoredState restore_checkpoint(const std::string& path, const config::RunConfig& config,
                                 const TrainingParts& parts, optim::Scheduler* scheduler,
                                 optim::GradScaler* scaler = nullptr,
                                 EarlyStopping* early_stopping = nullptr);

/// The pipeline's share of the loop.
struct TrainingHooks {
  /// Forward of one batch (on the loader's device-independent tensors): the loss to minimise
  /// and numbers to log with it. Required.
  std::function<losses::LossOutput(const data::LoadedBatch&)> step;
  /// Checks of a batch that read its host data (labels out of range, ...), throwing DataError;
  /// called before every step, also one that replays a CUDA graph instead of calling `step`.
  /// Optional.
  std::function<void(const data::LoadedBatch&)> check;
  /// Why `step` cannot be captured into a CUDA graph (`cuda_graphs:`), "" when it can: it reads
  /// nothing but the batch's images and labels, and copies nothing from the host. A replay
  /// runs the captured kernels on the next batch's images and labels without calling `step`.
  std::string capture_problem = "this pipeline's step has not been checked for CUDA graph capture";
  /// Called at the start of every epoch, after the model and criterion are put in train mode.
  std::function<void(int64_t epoch)> on_epoch_start;
  /// Validation of the current model: runs on every rank (collective), returns the result on
  /// rank 0 (other ranks may return anything). Required when the run has validation rows.
  std::function<metrics::EmbeddingMetricsResult()> validate;
  /// The rows `validate` evaluates (for the worst-query grids); required with `validate`.
  const data::DataSplit* validation_split = nullptr;
};

class Trainer {
 public:
  /// Checks the checkpoint and monitor metrics, builds the scheduler, restores the resumed
  /// checkpoint into `parts` (model, criterion, optimizer, scheduler, RNG), creates the run
  /// directory with its config.yaml (rank 0) and opens the run's logs, sets up gradient
  /// synchronisation and makes every rank start from rank 0's parameters and buffers.
  /// Collective under DDP.
  Trainer(const config::Document& document, const config::RunConfig& config, const RunContext& context,
          TrainingParts parts, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Where the run starts (after a resume: where the checkpoint left off).
  const TrainingPosition& start() const { return start_; }
  const RunPaths& paths() const { return paths_; }

  /// Trains from start() to max_epochs / max_steps over `train_inputs` (indexed by the
  /// sampler's batches), then writes the report and prints the best checkpoint's metrics.
  void fit(std::shared_ptr<const data::Dataset> train_inputs, const TrainingHooks& hooks);

 private:
  /// Forward and backward of one batch of an optimizer step (`first` and `last` of its
  /// accumulate_grad_batches batches: zero_grad before the first, gradient sync after the
  /// last); `logs` gets the loss's log values. Returns the batch's loss for the step's log: with
  /// deferred reads this rank's loss, detached, on the device; otherwise its mean over the
  /// ranks as a CPU double, checked finite (mean_finite_loss).
  at::Tensor accumulate_batch(const data::LoadedBatch& batch, const TrainingHooks& hooks, int64_t epoch,
                              bool first, bool last, std::map<std::string, at::Tensor>& logs);
  /// After the last batch of a step: apply_gradients, then count_step.
  void optimizer_step(std::map<std::string, double>& logs, std::map<std::string, at::Tensor>& device_logs);
  /// fp16's unscaling (a step with non-finite gradients is skipped: decided on the host, or by a
  /// fused optimizer's kernel on the device), clipping, the optimizer's step.
  void apply_gradients();
  /// After the optimizer's step: the loss scale's update (logged: in `logs` when the host knows
  /// it, else in `device_logs`, read with the step's loss), the step count, the per-step
  /// scheduler.
  void count_step(std::map<std::string, double>& logs, std::map<std::string, at::Tensor>& device_logs);
  /// device_skip_: a warning when the step of `line` (its read `values`) was skipped.
  void warn_of_skipped_step(const PendingStepLog& line, const std::vector<double>& values);
  /// `cuda_graphs`: the whole step of `batch` (accumulate_batch, then apply_gradients) through
  /// the StepGraph; returns the loss (detached, on the device, unread) and sets `logs`.
  at::Tensor graph_step(const data::LoadedBatch& batch, const TrainingHooks& hooks, int64_t epoch,
                        std::map<std::string, at::Tensor>& logs);
  /// The StepGraph for `cuda_graphs: true` when this run's steps can be captured; otherwise a
  /// warning saying why not, and null.
  std::unique_ptr<StepGraph> make_step_graph(const TrainingHooks& hooks) const;
  /// Batches of every epoch on this rank after limit_train_batches.
  int64_t limited_epoch_batches() const;
  /// The loader of this rank's batches of an epoch from `from` on (after limit_train_batches),
  /// its workers started.
  std::unique_ptr<data::Loader> epoch_loader(std::shared_ptr<const data::Dataset> inputs,
                                             const ddp::EpochPosition& from) const;
  /// Validation, checkpoints (holding `next`) and schedulers after `epoch`'s batches (all of
  /// them, or up to max_steps when `stopping`). Returns true when early stopping ends the run.
  bool end_epoch(int64_t epoch, const TrainingPosition& next, bool stopping, const TrainingHooks& hooks);
  /// After an optimizer step that leaves training at `here` (`epoch_ends`: the epoch's last
  /// batch): a failed checkpoint write stops the run, a due trigger writes last.ckpt (at the
  /// epoch's end instead, when it ends), an interrupt writes it and ends the process.
  void after_step(const TrainingPosition& here, bool epoch_ends);
  /// last.ckpt at the end of training (`final`: where it stopped), then every write in place.
  void finish(const TrainingPosition& final);
  bool reached_max_steps() const;
  /// Seconds this run has trained: the resumed checkpoint's plus this process's since fit().
  double training_time_s() const;
  /// Whether `max_time` is reached after a step; every rank gets rank 0's answer (Lightning's
  /// Timer broadcasts it too), so all stop at the same step. Collective when max_time is set.
  bool reached_max_time() const;
  /// The loss's mean over the ranks (collective), read now; RuntimeError when it is not finite.
  double mean_finite_loss(const at::Tensor& loss, int64_t epoch) const;
  /// Counts a batch's loss (its mean over the ranks) with weight `rows` into the epoch's mean.
  void add_to_epoch_loss(double batch_loss, int64_t rows);
  /// The epoch's mean training loss, rank 0's on every rank (collective under DDP).
  double epoch_training_loss() const;
  /// The RuntimeError of a non-finite `loss` at `step` (1-based) of `epoch`; `stopped` says
  /// what was applied.
  [[noreturn]] void throw_non_finite_loss(double loss, int64_t epoch, int64_t step,
                                          const std::string& stopped) const;
  /// A step's log line: written now without deferred reads; with them kept unread while the
  /// next step runs, and the previous step's written. Collective.
  void log_step(std::unique_ptr<PendingStepLog> line);
  /// Writes the unread step's line, if any (before validation, checkpoints, the end). Collective.
  void write_unread_step();
  /// Reads `line`'s values, averages its loss over the ranks (deferred reads: checks that it is
  /// finite), writes train.jsonl and the logger's scalars (rank 0), updates step_status_.
  void write_step_log(PendingStepLog& line);
  /// Rank 0: hands the CheckpointWriter a snapshot of the state at `next` for `files` (names in
  /// checkpoints/; the first is written, the others get the same bytes), then `remove`.
  void write_checkpoints(const TrainingPosition& next, std::vector<std::string> files,
                         std::vector<std::string> remove = {});
  /// last.ckpt at `next`, unless save_last is off or last.ckpt already holds that position.
  void write_last(const TrainingPosition& next);
  /// After SIGINT/SIGTERM (single process, save_last): last.ckpt at `here`, then the process
  /// ends as the signal would have ended it.
  [[noreturn]] void stop_for_interrupt(const TrainingPosition& here);
  void restore(const std::string& checkpoint_path);
  /// Where the first epoch of this run starts in its global order (after restore(); a new run:
  /// the start of epoch 0 on this run's ranks).
  ddp::EpochPosition resumed_epoch_position() const;
  /// Rank 0 creates (or, resuming, reopens) and locks the run directory; every rank learns its paths.
  void claim_run_directory(const std::filesystem::path& resumed_run);
  std::map<std::string, double> with_best(std::map<std::string, double> metrics) const;

  const config::RunConfig& config_;
  const RunContext& context_;
  TrainingParts parts_;
  TrainerOptions options_;
  std::string resolved_yaml_;
  std::shared_ptr<optim::Scheduler> scheduler_;
  /// This rank's share of the sampler's epochs (the config's ddp: keys).
  std::unique_ptr<ddp::DDPSamplerWrapper> share_;
  /// Optimizer steps per epoch on this run's number of ranks, after limit_train_batches and
  /// accumulate_grad_batches (the scheduler's horizon).
  int64_t steps_per_epoch_ = 0;
  TrainingPosition start_;
  int64_t step_ = 0;
  /// Whether a step's loss and logs are read after the next step is queued (on CUDA, where a
  /// read waits for the GPU) instead of at once (on the CPU, where reading waits for nothing);
  /// OML_DEFER_STEP_READS=1 or 0 chooses either on any device.
  bool defer_step_reads_ = false;
  std::unique_ptr<PendingStepLog> unread_step_;  ///< deferred reads: the last step's line
  std::string step_status_;                      ///< the last written line, for the progress bar
  RunPaths paths_;
  std::optional<RunDir> run_dir_;  ///< rank 0: the run's directory, locked while training
  std::unique_ptr<RunRecorder> recorder_;
  std::unique_ptr<BatchTrace> batch_trace_;  ///< OML_TRACE_BATCHES only
  std::unique_ptr<StepProfiler> profiler_;   ///< records `profile:`'s steps (none: does nothing)
  std::unique_ptr<distributed::GradientSync> gradient_sync_;
  /// What a metric-monitoring scheduler (reduce_on_plateau) steps with.
  MonitoredValue monitored_ = MonitoredValue::validation_metric;
  /// This epoch's training loss so far (each batch's mean over the ranks, weighted by the
  /// batch's rows, as Lightning's on_epoch mean; counted when the step's line is written, which
  /// is before the epoch's end also with deferred reads): what a training_loss monitor steps
  /// with. A run resumed inside an epoch counts that epoch's batches from the resume on.
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_rows_ = 0;
  /// precision 16 only (CUDA): the dynamic loss scale; in checkpoints (resume.grad_scaler), so a
  /// resumed run continues with the scale it had.
  std::unique_ptr<optim::GradScaler> scaler_;
  /// precision 16 with a fused optimizer: it skips steps with non-finite gradients on the
  /// device (as torch.optim's fused kernels under GradScaler), so no step reads the answer back.
  optim::DeviceSkipping* device_skip_ = nullptr;
  double skipped_steps_logged_ = 0;  ///< the last amp_skipped_steps read (device_skip_'s warnings)
  std::unique_ptr<EarlyStopping> early_stopping_;  ///< `early_stopping:` only
  std::unique_ptr<StepGraph> step_graph_;          ///< `cuda_graphs:` where steps can be captured
  std::vector<std::pair<std::string, at::Tensor>> buffers_;
  CheckpointSchedule schedule_;
  BestCheckpoints best_checkpoints_;
  /// Where last.ckpt stands (written or handed to the writer), or the resumed checkpoint's position.
  std::optional<TrainingPosition> last_written_;
  bool last_due_at_epoch_end_ = false;  ///< a step trigger fired at the epoch's last step
  std::map<std::string, double> last_metrics_, best_metrics_;
  std::string resumed_logger_run_id_;  ///< the checkpoint's tracker run, when resumed
  double time_before_ = 0;             ///< training_time_s of the resumed checkpoint
  std::chrono::steady_clock::time_point fit_start_ = std::chrono::steady_clock::now();
  /// Rank 0; declared last, so destroyed first: its thread may still call recorder_ while it
  /// finishes the write in flight.
  std::unique_ptr<CheckpointWriter> writer_;
};

}  // namespace oml::pipelines
