#pragma once
// What every oml-train pipeline (extractor, pairwise) does around its own training step:
// resuming, the run directory and its logs, the mean loss across ranks with the NaN stop,
// the scheduler, and the end of every epoch (validation on schedule, best/last checkpoints).
// A pipeline builds its model, loss and optimizer, hands them to a TrainingSession, and keeps
// only what is its own: the batches and the forward pass.

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "oml/config/run_config.h"
#include "pipeline_setup.h"

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
class Scheduler;
}  // namespace oml::optim
namespace oml::cli {
struct Invocation;
}  // namespace oml::cli
namespace oml::data {
class Dataframe;
class Sampler;
struct LoaderOptions;
struct DataSplit;
}  // namespace oml::data
namespace oml::metrics {
struct EmbeddingMetricsResult;
}  // namespace oml::metrics
namespace oml::distributed {
struct GradientSyncOptions;
}  // namespace oml::distributed

namespace oml::pipelines {

struct RunContext;
class RunRecorder;

/// The modules and optimizer a pipeline trains; checkpoints hold `model`'s state dict, resume
/// state holds the rest.
struct TrainedParts {
  torch::nn::Module* model = nullptr;
  torch::nn::Module* criterion = nullptr;  ///< loss parameters (ArcFace weights); may be null
  torch::optim::Optimizer* optimizer = nullptr;
  std::shared_ptr<optim::Scheduler> scheduler;  ///< may be null
};

/// The config's scheduler over `optimizer` (null when none is configured); `batches_total` is
/// the number of optimizer steps the run will take.
std::shared_ptr<optim::Scheduler> build_scheduler(const config::RunConfig& config,
                                                  torch::optim::Optimizer& optimizer, int64_t batches_total);

/// max_steps, or max_epochs x steps per epoch when smaller or unset.
int64_t total_training_steps(const config::RunConfig& config, int64_t steps_per_epoch);

/// The config's sampler over the train split, wrapped by the DDP plugin for this rank.
std::shared_ptr<const data::Sampler> build_train_sampler(const config::RunConfig& config,
                                                         const data::Dataframe& dataframe,
                                                         const RunContext& context);

/// Every parameter of `module` as (prefix + name, tensor), trainable or not (a frozen backbone
/// may be unfrozen later), for gradient synchronisation.
std::vector<std::pair<std::string, at::Tensor>> parameters_for_sync(const torch::nn::Module& module,
                                                                    const std::string& prefix);
distributed::GradientSyncOptions gradient_sync_options(const config::RunConfig& config);

/// Loader options of training epoch `epoch` (workers, seed).
data::LoaderOptions training_loader_options(const config::RunConfig& config, int64_t epoch);

/// "epoch 3/10".
std::string epoch_label(int64_t epoch, int64_t max_epochs);
/// `samples` over the time since `since`, which is reset to now.
double samples_per_second(int64_t samples, std::chrono::steady_clock::time_point& since);
/// "loss 0.2130 lr 1.00e-03 850 img/s" for progress bars.
std::string step_status(double loss, double lr, double samples_per_s);

/// Where training starts: epoch and batch of the sampler, and the global step.
struct TrainingPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t step = 0;
};

class TrainingSession {
 public:
  /// Checks metric_for_checkpointing / monitor_metric against `overall_keys`, restores
  /// `--resume` state into `parts`, creates the run directory (rank 0) and opens its logs.
  TrainingSession(const cli::Invocation& invocation, const config::Document& document,
                  const config::RunConfig& config, const RunContext& context, TrainedParts parts,
                  bool has_validation, const std::vector<std::string>& overall_keys);
  ~TrainingSession();

  const TrainingPosition& start() const { return start_; }
  const RunPaths& paths() const { return paths_; }
  int64_t global_step() const { return step_; }
  /// True once the optimizer has stepped `max_steps` times (never without max_steps).
  bool reached_max_steps() const { return config_.max_steps && step_ >= *config_.max_steps; }

  /// Mean of `loss` over the ranks (collective). Throws RuntimeError naming the step when any
  /// rank's loss is not finite — before the step is applied, keeping the last checkpoint.
  double mean_finite_loss(const at::Tensor& loss, int64_t epoch) const;

  /// After optimizer.step(): advances the step count and a per-step scheduler.
  void optimizer_stepped();
  /// One train.jsonl line and logger scalars (rank 0); epoch, step and lr are added here.
  void log_step(int64_t epoch, nlohmann::json record);
  double lr() const;

  /// Ends epoch `epoch` after `batches_done` of its `batches_in_epoch` batches: validates when
  /// due (`validate` runs on every rank and returns the result on rank 0; every rank receives
  /// its metrics), records them (metrics.jsonl, logger, grids of `validation_split`'s worst
  /// queries, report.html), saves best.ckpt on improvement and last.ckpt always, steps
  /// per-epoch schedulers. Collective.
  void end_epoch(int64_t epoch, int64_t batches_done, int64_t batches_in_epoch, bool stopping,
                 const data::DataSplit& validation_split,
                 const std::function<metrics::EmbeddingMetricsResult()>& validate);

  /// Writes the final report and prints the best checkpoint's metrics and where the run is
  /// (rank 0).
  void finish();

 private:
  void save(const std::string& name, int64_t next_epoch, int64_t next_batch,
            const std::map<std::string, double>& metrics) const;

  const config::RunConfig& config_;
  const RunContext& context_;
  TrainedParts parts_;
  std::string resolved_yaml_;
  bool has_validation_;
  TrainingPosition start_;
  int64_t step_ = 0;
  RunPaths paths_;
  std::unique_ptr<RunRecorder> recorder_;
  std::optional<double> best_;
  std::map<std::string, double> last_metrics_, best_metrics_;
};

}  // namespace oml::pipelines
