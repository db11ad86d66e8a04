#pragma once
// A Neptune run written offline, as the `neptune` client 1.x writes one with mode="offline", for
// `neptune sync` to upload later (oml-cpp never talks to Neptune's servers):
//
//   <run dir>/.neptune/offline/run__<uuid>__<pid>__<key>/
//     data-1.log          the run's operation queue: one JSON object a line,
//                         {"obj": <operation>, "version": N, "at": <unix s>}, versions 1, 2, 3, ...
//     last_put_version    the last version written (text); last_ack_version: what was uploaded
//     metadata.json       mode, container id and type, structure version 3, when it was created
//     upload_path/        the files the run uploads (config, report, checkpoints), hard links
//
// The operations are the client's (neptune/internal/operation.py): AssignString, AssignFloat,
// AssignInt, AssignBool, AddStrings, LogFloats, LogImages, UploadFile. What goes where is what
// OML's NeptunePipelineLogger (Lightning's NeptuneLogger) logs: sys/name, sys/tags, the config
// flattened with "|" under <prefix>/hyperparams, every value at <prefix>/<key> with its step,
// images at their own key, checkpoints under <prefix>/model/checkpoints, the end as
// <prefix>/status ("success" / "failed") and sys/failed.
//
// A step's operations go to disk when the next step begins (and at each epoch's end), so a
// killed run keeps what it logged before its last step. A run resumed from a checkpoint reopens
// its offline run (found by the uuid the checkpoint names), drops the values the killed process
// logged after the checkpoint's step and appends, so that one `neptune sync` makes one Neptune
// run whose series have each step once (Neptune refuses a step that does not increase).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "oml/report/run_logger.h"

namespace oml::report {

/// Args of the `neptune` logger: Lightning's NeptuneLogger's and neptune.init_run's that mean
/// something offline.
struct NeptuneOptions {
  /// "workspace/project": named in the `neptune sync --project` line (an offline run does not
  /// hold its project; `neptune sync` takes it, or $NEPTUNE_PROJECT). "" = $NEPTUNE_PROJECT.
  std::string project;
  std::string name;  ///< sys/name; "" = the run directory's name
  std::string description;
  std::vector<std::string> tags;      ///< added to OML's tags: the config's, postfix, run folder
  std::string prefix = "training";    ///< Lightning's: values, hyperparams, status go under it
  bool log_model_checkpoints = true;  ///< Lightning's default: upload last.ckpt and best.ckpt
  /// mode: async or sync still writes offline (with a notice); mode: debug logs nothing.
  bool online_requested = false;
  bool disabled = false;
};

class NeptuneOfflineRun final : public RunLogger {
 public:
  /// Creates the offline run (or reopens the one `context.resumed_run_id` names) and writes the
  /// run's name, tags and hyperparams. RuntimeError naming the file when it cannot be written.
  NeptuneOfflineRun(NeptuneOptions options, const LoggerContext& context, const nlohmann::json& config);
  ~NeptuneOfflineRun() override;

  void log_scalar(const std::string& tag, double value, int64_t step) override;
  void log_image(const std::string& tag, const EncodedImage& image, int64_t step) override;
  void log_file(const std::filesystem::path& file, const std::string& name) override;
  void flush() override;
  void finish(RunStatus status) override;
  /// The container's uuid (what the offline folder is named after).
  std::string run_id() const override { return id_; }

  /// The offline run's folder, under <run dir>/.neptune/offline/.
  const std::filesystem::path& directory() const { return dir_; }
  /// The command that uploads it.
  std::string sync_command() const;

 private:
  void open_new(const LoggerContext& context, const nlohmann::json& config);
  void reopen(const std::filesystem::path& dir, int64_t resumed_at_step);
  /// Appends one operation: {"obj": op, "version": next, "at": now}.
  void put(nlohmann::json op);
  /// Puts the data file's bytes on disk and writes last_put_version beside it.
  void sync_to_disk();
  void begin_step(int64_t step);
  void upload(const std::filesystem::path& file, const std::string& attribute, const std::string& ext);
  std::string key(const std::string& tag) const;

  NeptuneOptions options_;
  std::string id_;
  std::filesystem::path neptune_dir_, dir_, data_path_;
  std::ofstream out_;
  int64_t version_ = 0;
  std::optional<int64_t> step_;
  std::set<std::string> uploaded_;  ///< attributes with an UploadFile operation already
  bool warned_non_finite_ = false;
  bool finished_ = false;
};

}  // namespace oml::report
