#pragma once
// Progress reporting for long loops (training epochs, embedding, k-NN, conversion): a
// redrawn bar with rate and ETA on a terminal, plain periodic lines otherwise (log files, CI),
// nothing in quiet mode or on ranks other than 0.

#include <chrono>
#include <cstdint>
#include <string>

#include "oml/common/progress_callback.h"

namespace oml::pipelines {

enum class ProgressMode { automatic, bar, lines, quiet };

class Progress {
 public:
  /// `total` steps of `unit` ("img", "batch"); `label` is printed in front ("epoch 3/10").
  Progress(std::string label, int64_t total, std::string unit, ProgressMode mode = ProgressMode::automatic);
  ~Progress();

  /// Advances by `steps` items; `status` is shown after the rate ("loss 0.213 lr 1e-3").
  void advance(int64_t steps, const std::string& status = "");
  /// Prints the final line (called by the destructor if not called before).
  void finish(const std::string& status = "");

  /// Sets the default mode for new bars (commands set it from --quiet / rank).
  static void set_default_mode(ProgressMode mode);

 private:
  void draw(bool final_line);

  std::string label_;
  int64_t total_;
  std::string unit_;
  ProgressMode mode_;
  int64_t done_ = 0;
  std::string status_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

/// "auto" | "bar" | "lines" | "quiet" (the --progress option); UsageError otherwise.
ProgressMode parse_progress_mode(const std::string& text);

/// A callback for library work (k-NN, conversion) that draws a Progress labelled `label`. A
/// call with fewer units done than the previous one starts a new bar (a second pass, e.g. the
/// test split after the train split).
ProgressCallback progress_callback(const std::string& label, const std::string& unit);

/// "1:02:03" / "02:03".
std::string format_duration(double seconds);

}  // namespace oml::pipelines
