#pragma once
// The run directory of a training run (docs/contracts.md#run-directory): logs_root/run_name
// holding the resolved config.yaml, metrics.jsonl, train.jsonl and checkpoints/.

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/io/lock_file.h"

namespace oml::io {
class InterruptHook;
class PendingFile;
}  // namespace oml::io

namespace oml::pipelines {

/// "2026-11-22_01-52-07.123_4242" (local time to the millisecond, then the process id) +
/// ("_" + postfix when given): runs started in the same second get different names.
std::string default_run_name(const std::string& postfix);

/// The run directory of the checkpoint given to `--resume`: <run> for <run>/checkpoints/last.ckpt
/// with the config.yaml oml-train wrote beside checkpoints/. UsageError for anything else — a
/// checkpoint outside a run directory, or another checkpoint of a run (best.ckpt is an earlier
/// state: resuming from it would roll the run back and overwrite its newer files); the message
/// says how to start a new run from such a checkpoint's weights instead.
std::filesystem::path resumed_run_directory(const std::filesystem::path& checkpoint);

/// The keys whose values differ between two resolved configs, as "key: before -> after" lines
/// (nested keys dotted: "optimizer.args.lr: 0.001 -> 0.01"; a key only one side has shows
/// "(absent)"). For the warnings of a resumed run.
std::vector<std::string> config_differences(const std::string& before_yaml, const std::string& after_yaml);

/// The folder oml-validate (metrics.json, images/), oml-predict (embeddings.npy, .pt, .csv) or
/// oml-search writes its named outputs into. Other files there stay. An output already there is
/// replaced only when the command wrote it: its marker file (".oml-predict") lists each output
/// it wrote with what the file was then (size and modification time: io::entry_fingerprint), so a file put
/// there since — the user's own neighbours.csv, a link, another command's output of the same
/// name — is never overwritten. An output named with a trailing '/' ("images/") is a folder, the
/// others files: one of the other kind in its place is refused before the work too.
///
///   CommandOutput output = prediction_output(save_dir);
///   output.check();                    // every rank, before the work: a refusal costs seconds
///   ... the work ...
///   output.claim({"embeddings.npy"});  // rank 0, right before writing
///   io::write_npy(output.stage("embeddings.npy"), ...);  // a temporary beside it
///   output.finish();                   // all moved into place; recorded; stale outputs removed
///
/// The outputs of one run are one set: each is written to a temporary (stage) and all are moved
/// into place together by finish(), so a run that fails half-way (a full disk) leaves the earlier
/// run's set as it was, and its temporaries are removed (by the destructor, by the interrupt
/// cleanup, or after a SIGKILL by the command's next claim).
class CommandOutput {
 public:
  CommandOutput(std::filesystem::path folder, std::string command, std::vector<std::string> outputs);
  ~CommandOutput();
  CommandOutput(const CommandOutput&) = delete;
  CommandOutput& operator=(const CommandOutput&) = delete;

  /// UsageError naming the folder, the output in the way and what to do. Only reads.
  void check() const;
  /// Takes the folder's lock (".<command>.lock", held until finish() or destruction: a second
  /// run of the command into the folder is a UsageError), check()s again, creates the folder and
  /// marks the outputs in `written` (a subset of the outputs) as being written, so that those of
  /// a run interrupted while writing them are its own. Also removes the temporaries of these
  /// outputs that a killed earlier run left behind. Call right before the outputs.
  void claim(const std::vector<std::string>& written);
  /// Where to write claimed output `output` ("images/" for a folder): a temporary beside it,
  /// this process's until finish() moves it into place (or the destructor removes it).
  std::filesystem::path stage(const std::string& output);
  /// After every staged output is written: moves them into place (a folder replacing the earlier
  /// one whole), records what they are, and removes this command's earlier outputs that this run
  /// did not write again (the neighbours of an earlier --retrieve next to new embeddings would
  /// describe other rows). A claimed output left unstaged, or staged and not written, counts as
  /// not written. Releases the lock.
  void finish();
  const std::filesystem::path& folder() const { return folder_; }

 private:
  std::filesystem::path marker() const { return folder_ / ("." + command_); }
  /// The outputs the marker lists, each with its fingerprint ("pending" while being written);
  /// nullopt without a marker; an empty map for a marker that lists none (written before
  /// outputs were listed: all of them count as the command's).
  std::optional<std::map<std::string, std::string>> recorded() const;
  void write_marker(const std::map<std::string, std::string>& outputs) const;

  std::filesystem::path folder_;
  std::string command_;
  std::vector<std::string> outputs_;
  void drop_unproduced();
  void publish_staged();
  void discard_staged() noexcept;

  std::vector<std::string> written_;
  std::map<std::string, std::string> earlier_;  ///< the marker's entries as claim() found them
  std::map<std::string, std::string> claimed_;  ///< them with this run's outputs pending
  std::map<std::string, std::filesystem::path> staged_;
  std::vector<std::unique_ptr<io::PendingFile>> pending_;
  io::LockFile lock_;
};

/// Where oml-validate writes metrics.json and images/: logs_root/run_name, the name defaulting to
/// default_run_name(postfix or "validate").
CommandOutput validation_output(const std::string& logs_root, const std::string& run_name,
                                const std::string& postfix);

/// Where oml-predict writes embeddings.npy, embeddings.pt and embeddings.csv (and with --retrieve
/// neighbours.csv, neighbours_ids.npy, neighbours_distances.npy): save_dir.
CommandOutput prediction_output(const std::string& save_dir);

/// The directory a training run writes into, owned by that run alone (docs/training.md#the-run-directory):
/// - `create` makes logs_root/run_name and its checkpoints/ folder; an existing folder of that
///   name is a ConfigError naming it (the check and the creation are one atomic mkdir, so two
///   runs never share a directory);
/// - `reopen` continues an existing run directory (a resumed run);
/// - both take an exclusive lock (<run>/.lock, flock) held while the object lives: a second
///   process opening the same run directory gets a UsageError naming the holder. The lock is
///   the kernel's, so a killed process never leaves a stale one; the file is removed when the
///   object ends and when an interrupt (SIGINT, SIGTERM) ends the process.
class RunDir {
 public:
  static RunDir create(const std::filesystem::path& logs_root, const std::string& run_name);
  static RunDir reopen(const std::filesystem::path& run_directory);
  RunDir(RunDir&& other) noexcept;
  RunDir& operator=(RunDir&& other) noexcept;
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  ~RunDir();

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path checkpoints() const { return path_ / "checkpoints"; }

  /// Writes config.yaml atomically (a new run).
  void write_config(const std::string& resolved_yaml) const;
  /// A resumed run keeps the config.yaml it started with and writes the resolved config it is
  /// resumed with beside it, as config.resume-<N>.yaml (the first free N); returns the config
  /// the run started with.
  std::string write_resume_config(const std::string& resolved_yaml) const;
  /// Drops the lines of train.jsonl and metrics.jsonl recorded after optimizer step `step`
  /// (what a killed run wrote after its last checkpoint), so that a resumed run continues the
  /// logs without repeating steps. Each file is rewritten atomically.
  void truncate_logs_after(int64_t step) const;

 private:
  explicit RunDir(std::filesystem::path path);
  void lock();
  void release();

  std::filesystem::path path_;
  io::LockFile lock_;
  /// Removes the lock file when an interrupt ends the process (no destructor runs then).
  std::unique_ptr<io::InterruptHook> remove_lock_on_interrupt_;
};

/// Appends one JSON object per line and flushes after each, so a killed run keeps every line
/// it finished writing.
class JsonlWriter {
 public:
  explicit JsonlWriter(const std::filesystem::path& path);
  void write(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace oml::pipelines
