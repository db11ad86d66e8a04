#pragma once
// Everything a training pipeline records about a run besides checkpoints: train.jsonl,
// metrics.jsonl, the config's logger (TensorBoard by default: a scalar for every logged number),
// the worst-query grids of each validation when `log_images: true` (PNG files under
// images/epoch_NNN/ and logger images) and report.html, refreshed after each validation and at
// the end. Only rank 0 records; on the other ranks every method returns at once. train.jsonl and
// metrics.jsonl are the run's record: failing to write them ends the run. The logger, the grids
// and the report are views of it: their failures are warnings and training goes on.
//
//   RunRecorder recorder(cfg, ctx, paths.root, {has_validation, config_yaml});
//   recorder.train_step(record);                      // {"epoch", "step", "loss", "lr", ...}
//   recorder.validation(epoch, step, result, split);  // rank 0's metrics result
//   recorder.checkpoint_written(path);                // offers it to the logger (any thread)
//   recorder.end_of_epoch();                          // the logger flushes
//   recorder.finish();
//
// The logger's run ends FINISHED at finish(), FAILED when the recorder is destroyed without it
// (the command is ending with an error) and KILLED on SIGINT/SIGTERM (an io::InterruptHook).
// Every logger call holds one lock, so the interrupt's thread never enters the logger while
// the training thread is inside it.
//
// Any pipeline (extractor, pairwise) uses it the same way. A pipeline that wants only the
// logger: report::make_run_logger(cfg.logger, {run_dir}, ctx.is_main()).

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>

#include "oml/config/run_config.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/metric_table.h"
#include "oml/report/run_logger.h"
#include "runtime/run_dir.h"

namespace oml::data {
struct DataSplit;
}  // namespace oml::data

namespace oml::io {
class InterruptHook;
}  // namespace oml::io

namespace oml::pipelines {

struct RunContext;

/// What a recorder needs to know about its run besides the config.
struct RecorderOptions {
  bool has_validation = false;  ///< writes metrics.jsonl
  std::string config_yaml;      ///< the resolved config (what config.yaml holds)
  /// The run continues from its checkpoint at this step (the logger drops what the killed
  /// process logged after it) ...
  std::optional<int64_t> resumed_at_step;
  /// ... and continues the checkpoint's tracker run (io::ResumeState::logger_run_id).
  std::optional<std::string> resumed_logger_run_id;
};

class RunRecorder {
 public:
  RunRecorder(const config::RunConfig& config, const RunContext& context,
              const std::filesystem::path& run_dir, RecorderOptions options);
  /// Ends the logger's run as FAILED unless finish() was called.
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  /// One line of train.jsonl; every number in it but epoch/step also becomes "train/<key>".
  void train_step(const nlohmann::json& record);
  /// One validation (rank 0 passes its result; other ranks may pass anything): metrics.jsonl,
  /// one scalar per metric key, grids when log_images, then report.html.
  void validation(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                  const data::DataSplit& split);
  /// After an epoch's checkpoints and validation: the logger flushes what it has.
  void end_of_epoch();
  /// A checkpoint was written at `path` (offered to the logger as "checkpoints/<file name>").
  /// Called on the checkpoint writer's thread: it only takes the logger's lock.
  void checkpoint_written(const std::filesystem::path& path);
  /// Rewrites report.html and ends the logger's run as FINISHED (end of training).
  void finish();

  /// The logger's id of this run for checkpoints, as "<logger name>:<id>" ("" on other ranks or
  /// when it has none).
  std::string logger_run_id() const;

 private:
  void write_report();
  void record_grids(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                    const data::DataSplit& split);
  /// Runs `work`; a failure (full disk, unwritable file) is a warning, never the end of training.
  void best_effort(const std::string& what, const std::function<void()>& work);
  /// best_effort on the logger, holding logger_mutex_.
  void with_logger(const std::function<void(report::RunLogger&)>& work);
  /// Ends the logger's run once (`ended_` guards it); called with logger_mutex_ held.
  void end_logger_run(report::RunStatus status);

  bool active_;
  std::filesystem::path run_dir_;
  bool log_images_;
  std::string checkpoint_metric_;
  metrics::VisualizationOptions visualization_;
  int64_t max_image_pixels_ = 0;
  bool maximise_;
  std::shared_ptr<report::RunLogger> logger_;
  std::string logger_name_;  ///< the config's logger component ("" for none)
  std::timed_mutex logger_mutex_;
  bool ended_ = false;
  std::unique_ptr<io::InterruptHook> interrupt_hook_;
  std::optional<JsonlWriter> train_log_;
  std::optional<JsonlWriter> metrics_log_;
  std::mutex warned_mutex_;  ///< best_effort runs on the checkpoint writer's thread too
  std::set<std::string> warned_;
};

}  // namespace oml::pipelines
