#pragma once
// TensorBoard event files written without TensorFlow: Event protocol buffers (our own .proto
// with TensorBoard's field numbers) in TFRecord framing (oml/report/tfrecord.h).
//
// The file is `<dir>/events.out.tfevents.<unix time>.<hostname>`; its first record is the
// "brain.Event:2" version event TensorBoard expects. Every record is flushed as it is written,
// so a crashed run keeps every event it logged.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "oml/report/run_logger.h"

namespace oml::report {

/// Options of the `tensorboard` logger (`logger: {name: tensorboard, args: {subdir: tensorboard}}`).
struct TensorBoardOptions {
  std::string subdir = "tensorboard";  ///< folder under the run directory ("" = the run directory)
};

class TensorBoardWriter final : public RunLogger {
 public:
  /// Creates `dir` and a new event file in it. Throws RuntimeError naming the file. With
  /// `resumed_at_step`, the events of `dir`'s earlier files after that step are dropped
  /// (drop_events_after) and the new file starts with a SessionLog START at the next step, so that
  /// TensorBoard shows one curve where the run was killed and resumed.
  explicit TensorBoardWriter(const std::filesystem::path& dir, std::optional<int64_t> resumed_at_step = {});

  void log_scalar(const std::string& tag, double value, int64_t step) override;
  void log_image(const std::string& tag, const EncodedImage& image, int64_t step) override;

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_event(const std::string& serialized_event);

  std::filesystem::path path_;
  std::ofstream out_;
};

/// One event of a file, decoded (for tests and tools that check what was logged).
struct LoggedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;           ///< set on the version event only
  bool session_start = false;         ///< a SessionLog START (a resumed run's restart marker)
  std::string tag;                    ///< set on summary events
  std::optional<double> scalar;       ///< simple_value
  std::optional<EncodedImage> image;  ///< image summary
};

/// Every value of every event in `path` (one LoggedEvent per summary value, plus the version
/// event). Throws DataError for checksum mismatches or undecodable records.
std::vector<LoggedEvent> read_event_file(const std::filesystem::path& path);

/// Rewrites the event file `path` (atomically) without its events whose step is after `step`;
/// leaves it as it is when nothing is after. Returns how many events were dropped.
int drop_events_after(const std::filesystem::path& path, int64_t step);

/// The event files in `dir` (events.out.tfevents.*), sorted by name.
std::vector<std::filesystem::path> find_event_files(const std::filesystem::path& dir);

}  // namespace oml::report
