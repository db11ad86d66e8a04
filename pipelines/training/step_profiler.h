#pragma once
// `profile: "FROM:TO"` / `oml-train --profile FROM:TO`: the Trainer's optimizer steps FROM through
// TO recorded into one Chrome trace per rank, <run>/profile/rank<R>.steps_<FROM>-<TO>.pt.trace.json
// (oml/report/profiler.h; docs/training.md#profiling-a-run). Each step is a `ProfilerStep#N` range,
// as torch.profiler marks steps, holding the phases the Trainer names (report::phase).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "oml/config/run_config.h"

namespace at {
class RecordFunction;
}  // namespace at
namespace oml::report {
class TraceSession;
}  // namespace oml::report

namespace oml::pipelines {

class StepProfiler {
 public:
  /// Records nothing without `range`. `cuda`: the run trains on a GPU (its kernels are recorded).
  StepProfiler(std::optional<config::StepRange> range, std::filesystem::path run_root, int64_t rank,
               bool cuda);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  /// Before the first batch of optimizer step `step` (the data wait included): recording starts at
  /// the first step inside the range (a run resumed inside it records the rest), and the step's
  /// range opens. Called again for the same step (an epoch ended before its first batch), nothing.
  void step_begins(int64_t step);
  /// After step `step` is applied and logged: its range closes; after the range's last step the
  /// trace is written.
  void step_ends(int64_t step);
  /// Training is over: a recording still running (the run stopped before the range's end) is
  /// written with the steps it has, and says so.
  void finish();

 private:
  void write();

  std::optional<config::StepRange> range_;
  std::filesystem::path path_;
  bool cuda_ = false;
  std::unique_ptr<report::TraceSession> session_;
  std::unique_ptr<at::RecordFunction> step_range_;
  int64_t open_step_ = 0;   ///< the step whose range is open (0: none)
  int64_t first_step_ = 0;  ///< the first step recorded
  int64_t last_ended_ = 0;  ///< the last step recorded to its end
  bool done_ = false;       ///< the trace was written (once per run)
};

}  // namespace oml::pipelines
