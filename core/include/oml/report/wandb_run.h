#pragma once
// A Weights & Biases run written offline, as W&B's own offline mode writes it, for `wandb sync`
// to upload later (oml-cpp never talks to W&B's servers):
//
//   <save_dir>/wandb/offline-run-<YYYYmmdd_HHMMSS>-<id>/
//     run-<id>.wandb    the run's record log: a header, the run (project, entity, name, tags,
//                       notes, group, job type, config), one history row per step, summaries,
//                       the files, the exit record (exit code 0 finished, 1 failed, 130 killed)
//     files/            the files the run uploads: oml/config.yaml, oml/report.html, the
//                       checkpoints with log_model, media/images/*.png of logged images
//
// The record log is W&B's datastore format (LevelDB's log format: 32 KiB blocks of records, each
// with a CRC-32 of its type and data, behind a 7-byte ":W&B" header), holding Record protocol
// buffers with W&B's field numbers (src/report/wandb_record.proto). A step's row is written and
// flushed when the next step begins (and at each epoch's end), so a killed run keeps every step but
// the one it was in (Ctrl-C/SIGTERM: that one too); a run resumed from
// a checkpoint reopens its offline run (found by the id the checkpoint names), cuts the records
// the killed process wrote after the checkpoint's step and appends to it, so that one
// `wandb sync` uploads one run whose history has each step once.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "oml/report/run_logger.h"

namespace oml::report {

namespace wandb {
class Record;  // src/report/wandb_record.proto
}  // namespace wandb

/// Args of the `wandb` logger: Lightning's WandbLogger's (which OML's configs use) that mean
/// something offline.
struct WandbOptions {
  std::string project = "uncategorized";  ///< W&B's default project
  std::string entity;                     ///< user or team; "" = the syncing user's default
  std::string name;                       ///< display name; "" = the run directory's name
  std::string id;                         ///< run id; "" = 8 random [a-z0-9] (or the resumed run's)
  std::vector<std::string> tags;          ///< added to the config's tags, postfix and run name
  std::string notes;
  std::string group;
  std::string job_type;
  std::string prefix;  ///< metric keys become "<prefix>-<key>" (Lightning's separator)
  /// Where the wandb/ folder goes; relative to the run directory; "" = the run directory.
  std::string save_dir;
  bool log_model = false;  ///< also upload the checkpoints (their last version) with the run's files
  /// `mode: online` or `offline: false`: the run is still written offline (with a notice), since
  /// oml-cpp does not talk to W&B's servers; `mode: disabled` logs nothing, as in W&B.
  bool online_requested = false;
  bool disabled = false;
};

class WandbOfflineRun final : public RunLogger {
 public:
  /// Creates the offline run (or reopens the one `context.resumed_run_id` names) and writes its
  /// header, run and config records. RuntimeError naming the file when it cannot be written.
  WandbOfflineRun(WandbOptions options, const LoggerContext& context, const nlohmann::json& config);
  ~WandbOfflineRun() override;

  void log_scalar(const std::string& tag, double value, int64_t step) override;
  void log_image(const std::string& tag, const EncodedImage& image, int64_t step) override;
  void log_file(const std::filesystem::path& file, const std::string& name) override;
  void flush() override;
  void finish(RunStatus status) override;
  std::string run_id() const override { return id_; }

  /// The offline run's folder (what `wandb sync` takes).
  const std::filesystem::path& directory() const { return dir_; }

 private:
  void open_new(const LoggerContext& context, const nlohmann::json& config, bool resumed);
  void reopen(const std::filesystem::path& dir, int64_t resumed_at_step);
  void append(wandb::Record& record);
  void write_row();
  void write_summary();
  void announce_file(const std::string& path, bool media);
  std::string key(const std::string& tag) const;
  double runtime_s() const;

  WandbOptions options_;
  std::string id_;
  std::filesystem::path dir_, log_path_;
  std::ofstream out_;
  int64_t offset_ = 0;  ///< bytes in the log (the block position of the next record)
  int64_t record_number_ = 0;
  double start_time_s_ = 0;  ///< unix time the run (this process) started
  std::optional<int64_t> row_step_;
  nlohmann::json row_ = nlohmann::json::object();  ///< the pending history row (this step)
  nlohmann::json summary_ = nlohmann::json::object();
  std::set<std::string> announced_files_;
  bool finished_ = false;
};

/// The Record protocol buffers of a `.wandb` file, in order, undecoded (tests decode them with
/// W&B's own reader). DataError for a bad header, a checksum mismatch or a torn record in the
/// middle; a torn record at the end (a crash mid-write) ends the list.
std::vector<std::string> read_wandb_records(const std::filesystem::path& path);

}  // namespace oml::report
