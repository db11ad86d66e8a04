#pragma once
// The `mlflow` logger: a run's config, tags, scalars and files sent to MLflow, as OML's
// MLFlowPipelineLogger (Lightning's MLFlowLogger) does (docs/reports.md#mlflow).
//
//   logger: {name: mlflow, args: {experiment_name: test_project, tracking_uri: "http://127.0.0.1:5000"}}
//   logger: {name: mlflow, args: {experiment_name: test_project, tracking_uri: "file:./ml-runs"}}
//
// An http(s):// tracking URI is a tracking server spoken to over its REST API; a file: URI or a
// plain path is a folder in MLflow's FileStore layout (relative to the run directory) that
// MLflow's own client reads. The training thread only queues: a background thread sends, in
// batches within MLflow's limits, retrying with backoff while the server cannot be reached or
// answers 408/429/5xx. Everything queued is also appended to <run>/mlflow/pending.jsonl until it
// is sent, so a run killed while the server was away sends it when resumed. finish() waits 5 s for
// what is left (longer only while the server keeps taking it, up to 2 minutes; never for KILLED).

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "oml/report/run_logger.h"

namespace oml::config {
class ArgsReader;
}  // namespace oml::config

namespace oml::report {

/// Lightning's MLFlowLogger arguments. Absent ones fall back as MLflow's clients do:
/// tracking_uri to $MLFLOW_TRACKING_URI, then "file:<save_dir>"; experiment_name to
/// $MLFLOW_EXPERIMENT_NAME, then "lightning_logs"; run_id to $MLFLOW_RUN_ID.
struct MlflowOptions {
  enum class LogModel { no, at_end, all };

  std::string experiment_name = "lightning_logs";
  std::string run_name;      ///< "" = the run directory's name
  std::string tracking_uri;  ///< resolved (never empty after read_mlflow_options)
  std::map<std::string, std::string> tags;
  std::string save_dir = "./mlruns";
  /// false: no checkpoints; true: best/last.ckpt at the end of training; "all": each one written.
  LogModel log_model = LogModel::no;
  std::string prefix;             ///< metric keys become "<prefix>-<key>"
  std::string artifact_location;  ///< of a new experiment ("" = the store's default)
  std::string run_id;             ///< an existing run to log into ("" = a new run)
};

/// Reads `logger: {name: mlflow, args: ...}` and MLflow's environment variables; checks that the
/// tracking URI is one oml-cpp writes (http://, https://, file: or a path).
MlflowOptions read_mlflow_options(config::ArgsReader& reader);

class MlflowLogger final : public RunLogger {
 public:
  /// Starts the run (or continues context.resumed_run_id / options.run_id) within a few seconds;
  /// a server that cannot be reached is one warning, and what is logged waits for it.
  MlflowLogger(MlflowOptions options, const LoggerContext& context);
  /// Stops the sending thread (what is not sent stays in pending.jsonl).
  ~MlflowLogger() override;
  MlflowLogger(const MlflowLogger&) = delete;
  MlflowLogger& operator=(const MlflowLogger&) = delete;

  void log_scalar(const std::string& tag, double value, int64_t step) override;
  void log_image(const std::string& tag, const EncodedImage& image, int64_t step) override;
  void log_file(const std::filesystem::path& file, const std::string& name) override;
  void flush() override;
  void finish(RunStatus status) override;
  std::string run_id() const override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace oml::report
