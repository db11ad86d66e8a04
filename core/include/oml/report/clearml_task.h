#pragma once
// A ClearML task written as ClearML's offline mode (Task.set_offline(True)) writes its session,
// for ClearML's Task.import_offline_session to upload later (docs/reports.md#clearml); oml-cpp
// never talks to a ClearML server:
//
//   <run dir>/clearml/offline-<32 hex>/       the session folder
//     task.json       the task: name, project_name, type, tags, hyperparams (General: the
//                     config flattened with "|", as OML's ClearMLPipelineLogger connects it),
//                     configuration (OmegaConf: the resolved config), artifacts, offline_folder
//     metrics.jsonl   one line per step: a JSON list of events, scalars (training_stats_scalar,
//                     metric = series = the key, iter = the step) and debug images
//                     (training_debug_image, the PNG under data/)
//     log.jsonl       console lines: where the session came from and how the run ended
//     data/<project>/<task>.<id>/{metrics,artifacts}/...   the images and artifact files
//   <run dir>/clearml/offline-<32 hex>.zip    the folder zipped, written when the run ends
//
// A step's events are written when the next step begins (and at each epoch's end), so a killed
// run keeps what it logged before its last step; the zip is rewritten at the end however the run
// ended (its folder imports as well). A run resumed from a checkpoint reopens its session (found
// by the task id the checkpoint names), drops the events the killed process logged after the
// checkpoint's step and appends, so that one import makes one task with each step once.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "oml/report/run_logger.h"

namespace oml::report {

/// Args of the `clearml` logger: OML's ClearMLLogger's (Task.init's project_name, task_name,
/// task_type, tags; offline_mode).
struct ClearmlOptions {
  std::string project_name = "Untitled";  ///< ClearML's own default outside a git repository
  std::string task_name;                  ///< "" = the run directory's name
  std::string task_type = "training";     ///< Task.TaskTypes' value
  std::vector<std::string> tags;          ///< added to OML's tags: the config's, postfix, run folder
  /// offline_mode: false (OML's default is true) still writes the session offline, with a
  /// notice: oml-cpp does not talk to ClearML's servers.
  bool online_requested = false;
};

/// ClearML's task types (Task.TaskTypes), what task_type may be.
const std::vector<std::string>& clearml_task_types();

class ClearmlOfflineTask final : public RunLogger {
 public:
  /// Creates the session (or reopens the one `context.resumed_run_id` names) and writes
  /// task.json. RuntimeError naming the file when it cannot be written.
  ClearmlOfflineTask(ClearmlOptions options, const LoggerContext& context, const nlohmann::json& config);
  ~ClearmlOfflineTask() override;

  void log_scalar(const std::string& tag, double value, int64_t step) override;
  void log_image(const std::string& tag, const EncodedImage& image, int64_t step) override;
  void log_file(const std::filesystem::path& file, const std::string& name) override;
  void flush() override;
  void finish(RunStatus status) override;
  /// The offline task's id ("offline-<32 hex>", the session folder's name).
  std::string run_id() const override { return id_; }

  /// The session folder; its zip is this path plus ".zip".
  const std::filesystem::path& directory() const { return dir_; }

 private:
  void open_new(const LoggerContext& context, const nlohmann::json& config);
  void reopen(const std::filesystem::path& dir, int64_t resumed_at_step);
  void begin_step(int64_t step);
  /// Writes the pending events of the step as one line of metrics.jsonl.
  void write_events();
  void write_log(const std::string& level, const std::string& message);
  void write_task();
  void add_artifact(const std::filesystem::path& file, const std::string& name);
  /// <project>/<task>.<id>: where the session's files go under data/ (with '/').
  std::string data_prefix() const;

  ClearmlOptions options_;
  std::string id_;
  std::filesystem::path dir_;
  nlohmann::json task_;  ///< task.json
  std::ofstream metrics_;
  std::optional<int64_t> step_;
  nlohmann::json events_ = nlohmann::json::array();  ///< this step's, not yet written
  bool warned_non_finite_ = false;
  bool finished_ = false;
};

}  // namespace oml::report
