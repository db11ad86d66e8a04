#pragma once
// Where the mlflow logger (oml/report/mlflow_logger.h) puts a run: an MLflow tracking server over
// its REST API (mlflow_rest_store.cpp, libcurl) or a local FileStore folder in MLflow's own layout
// (mlflow_file_store.cpp), chosen by the tracking URI. Private to core/src/report.
//
// Every method may throw StoreError: `transient` for what may work later (the server cannot be
// reached, a timeout, 429, 5xx), else permanent (the request itself is wrong: 4xx). The logger's
// sending thread is the only caller, except cancel(), which another thread calls to make a
// request in flight give up at once.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace oml::report::mlflow {

struct StoreError : std::runtime_error {
  StoreError(const std::string& message, bool transient_)
      : std::runtime_error(message), transient(transient_) {}
  bool transient;
};

/// A run as the store knows it.
struct RunInfo {
  std::string run_id;
  std::string experiment_id;
  std::string artifact_uri;  ///< where its artifacts go (mlflow-artifacts:/..., file:///..., ...)
  std::string status;        ///< RUNNING, FINISHED, FAILED, KILLED
};

struct Metric {
  std::string key;
  double value = 0;
  int64_t timestamp = 0;  ///< ms since the epoch
  int64_t step = 0;
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

/// One runs/log-batch request (within MLflow's limits: Batch::fits).
struct Batch {
  std::vector<Metric> metrics;
  KeyValues params;
  KeyValues tags;
  bool empty() const { return metrics.empty() && params.empty() && tags.empty(); }
};

/// MLflow's limits on one log-batch request (mlflow/utils/validation.py of MLflow 3.17).
constexpr std::size_t kMaxMetricsPerBatch = 1000;
constexpr std::size_t kMaxParamsTagsPerBatch = 100;
constexpr std::size_t kMaxEntitiesPerBatch = 1000;
constexpr std::size_t kMaxBatchBytes = 1000000;
constexpr std::size_t kMaxParamValueLength = 6000;
constexpr std::size_t kMaxTagValueLength = 8000;

class Store {
 public:
  virtual ~Store() = default;
  /// The tracking URI as the user gave it, for messages.
  virtual std::string where() const = 0;
  /// The id of the experiment `name`, created (with `artifact_location` when not empty) when
  /// absent. A deleted experiment of that name is a permanent StoreError.
  virtual std::string experiment_id(const std::string& name, const std::string& artifact_location) = 0;
  virtual RunInfo create_run(const std::string& experiment_id, const std::string& run_name,
                             int64_t start_time, const KeyValues& tags, const std::string& user) = 0;
  /// The run `run_id`, or nothing when the store has no such run.
  virtual std::optional<RunInfo> get_run(const std::string& run_id) = 0;
  virtual void log_batch(const std::string& run_id, const Batch& batch) = 0;
  /// Sets the run's status ("RUNNING", "FINISHED", ...) and, when > 0, its end time.
  virtual void update_run(const std::string& run_id, const std::string& status, int64_t end_time) = 0;
  /// Stores `file` as the artifact `artifact_path` ("checkpoints/best.ckpt") of `run`.
  virtual void log_artifact(const RunInfo& run, const std::filesystem::path& file,
                            const std::string& artifact_path) = 0;
  /// Makes a request in flight (on another thread) give up now, and every later one at once.
  virtual void cancel() {}
};

/// The store for `tracking_uri`: http:// or https:// (a tracking server), else a FileStore at the
/// path of a file: URI or a plain path, relative ones resolved against `base`.
std::unique_ptr<Store> open_store(const std::string& tracking_uri, const std::filesystem::path& base);

/// The FileStore at the folder of `uri` (a file: URI or a plain path, relative to `base`).
std::unique_ptr<Store> open_file_store(const std::string& uri, const std::filesystem::path& base);

/// The local folder of a `file:` URI or a plain path, relative ones against `base`.
std::filesystem::path local_path(const std::string& uri, const std::filesystem::path& base);
/// True when `uri` names a local folder (a file: URI or a path without a scheme).
bool is_local(const std::string& uri);
/// True when MLflow accepts `key` as a param, tag or metric key and its file store can keep it
/// as a relative path: at most 250 bytes of letters (any UTF-8), digits, '_', '-', '.', ' ', ':'
/// and '/', where the '/'-separated names are none of them empty, "." or "..".
bool is_valid_key(const std::string& key);
/// Writes `bytes` to a temporary next to `path` and renames it over `path`. Not
/// io::write_file_atomic: the logger's finish() runs inside an interrupt's cleanup, where
/// publish() and PendingFile would wait for the cleanup itself (io::InterruptHook).
void replace_file(const std::filesystem::path& path, const std::string& bytes);
/// Copies `file` to `<artifact_root>/<artifact_path>` (through a temporary and a rename).
void copy_artifact(const std::filesystem::path& artifact_root, const std::filesystem::path& file,
                   const std::string& artifact_path);

}  // namespace oml::report::mlflow
