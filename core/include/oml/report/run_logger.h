#pragma once
// Where a run's numbers and pictures go besides train.jsonl / metrics.jsonl: the `logger:`
// component of the config (docs/reports.md). Built-in: `tensorboard` (the default) writes TensorBoard
// event files into the run directory; `mlflow` sends the run to MLflow (mlflow_logger.h); `wandb`,
// `neptune` and `clearml` write the run offline in the tracker's own format for its tool to upload
// (wandb_run.h, neptune_run.h, clearml_task.h); `none` (or `logger: null`) records nothing.
//
//   auto logger = report::make_run_logger(cfg.logger, report::LoggerContext{run_dir}, ctx.is_main());
//   logger->log_scalar("train/loss", 0.42, step);
//
// Contract for a logger (built-in or from a plugin, registered in registries().loggers):
//   - every method is called from one thread; log_scalar / log_image many times per step, with
//     steps that never decrease;
//   - whatever was logged before a crash must survive it (flush as you go, or buffer on disk);
//   - a logger never stops training: its errors are oml::RuntimeError, which the caller turns
//     into one warning; a tracker that cannot reach its server buffers and retries instead;
//   - finish(status) is called once, last: FINISHED after training, FAILED when the command ends
//     with an error, KILLED on SIGINT/SIGTERM (from the interrupt cleanup's thread, with the
//     recorder's lock held so that the training thread is not inside the logger; it must return
//     within a few seconds).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <utility>

#include "oml/config/reader.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::report {

/// An encoded PNG and its size (TensorBoard wants both).
struct EncodedImage {
  std::string png;
  int height = 0;
  int width = 0;
  int channels = 3;  ///< 3 RGB, 4 RGBA, 1 grey
};

/// How a run ended, as the trackers name it (MLflow's RunStatus; W&B's exit code 0, 1, or 128 +
/// the signal for killed: 130 after Ctrl-C, 143 after SIGTERM).
enum class RunStatus { finished, failed, killed };

/// "FINISHED", "FAILED", "KILLED".
std::string run_status_name(RunStatus status);

class RunLogger {
 public:
  virtual ~RunLogger() = default;
  /// One value of the series `tag` ("train/loss", "OVERALL/cmc/1") at `step`.
  virtual void log_scalar(const std::string& tag, double value, int64_t step) = 0;
  /// One picture of the series `tag` at `step`.
  virtual void log_image(const std::string& tag, const EncodedImage& image, int64_t step) = 0;
  /// A file of the run the tracker keeps a copy of, under `name` ("config.yaml", "report.html",
  /// "checkpoints/best.ckpt"): offered at the start (config.yaml), after each checkpoint and at
  /// the end; a logger takes the ones its args ask for. The file may change later (report.html is
  /// rewritten), so a logger that sends it later copies it now.
  virtual void log_file(const std::filesystem::path& file, const std::string& name) {
    (void)file;
    (void)name;
  }
  /// The logging of a step is complete (after each epoch's checkpoints and validation): what
  /// was logged so far goes to disk (or its send queue). A logger that groups a step's values
  /// (a W&B history row) writes the group now; values logged later have a larger step.
  virtual void flush() {}
  /// The end of the run; nothing is logged after it (see the contract above).
  virtual void finish(RunStatus status) { (void)status; }
  /// This run's id at the tracker ("" for none). Saved in checkpoints: a run resumed from one
  /// continues the same tracker run (LoggerContext::resumed_run_id).
  virtual std::string run_id() const { return {}; }
};

/// What a logger's build gets besides its args.
struct LoggerContext {
  std::filesystem::path run_dir;  ///< the run directory (created already)
  std::string run_name;           ///< the run directory's name (OML's logs_folder)
  std::vector<std::string> tags;  ///< the config's `tags`, then `postfix` when set (as OML tags a run)
  std::string config_yaml;        ///< the resolved config, as in config.yaml
  /// The tracker run this run continues (the checkpoint's logger run id), when resumed.
  std::optional<std::string> resumed_run_id;
  /// Set when a run is resumed from its checkpoint at this step: anything the logger finds in
  /// run_dir logged after it came from the killed process and is logged again now, so the
  /// logger drops or hides it (the tensorboard logger does both).
  std::optional<int64_t> resumed_at_step;
};

/// Logs nothing: `logger: null`, `logger: {name: none}` and ranks other than 0.
class NullLogger final : public RunLogger {
 public:
  void log_scalar(const std::string&, double, int64_t) override {}
  void log_image(const std::string&, const EncodedImage&, int64_t) override {}
};

/// The config's logger for this process: the registered component named by `spec`, or a
/// NullLogger when `spec` is empty or this process is not the one that writes (`writer` false:
/// only rank 0 writes, so that N ranks do not produce N event files).
std::shared_ptr<RunLogger> make_run_logger(const std::optional<config::ComponentSpec>& spec,
                                           const LoggerContext& context, bool writer = true);

/// The resolved config (YAML text) as JSON, each scalar typed as YAML 1.2's core schema reads it
/// (null, true/false, integers, floats, else a string): the run's config as trackers record it.
nlohmann::json config_as_json(const std::string& yaml);

/// The leaves of `config` as (path, value) pairs, the path's keys joined by `separator` (OML logs
/// "criterion/args/margin" to MLflow): strings as they are, other scalars and lists as JSON text.
std::vector<std::pair<std::string, std::string>> flatten_config(const nlohmann::json& config,
                                                                const std::string& separator);

/// The leaves of `config` with their JSON values, the path's keys joined by `separator`, as OML's
/// flatten_dict makes the config it logs to Neptune and ClearML ("criterion|args|margin"): lists
/// stay values, an empty mapping has no leaf.
std::vector<std::pair<std::string, nlohmann::json>> flatten_config_values(const nlohmann::json& config,
                                                                          const std::string& separator);

/// Checks that the logger `spec` names is registered (Registry::require: a ConfigError listing
/// the loggers for an unknown name).
void require_logger(const config::ComponentSpec& spec);

/// Registers `tensorboard`, `wandb`, `neptune`, `clearml`, `mlflow` and `none`.
void register_builtin_loggers(Registries& registries);

}  // namespace oml::report
